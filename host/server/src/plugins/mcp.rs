//! MCP servers defined at run time: create, update and delete, written to the
//! `mcp_servers` table (with a `plugins` row for enabled, grant and reloads)
//! and the audit log, applied here before the call returns and on every other
//! node by its table poll. A new server starts with nothing granted: it
//! cannot run a program or reach a host until the operator grants it.

use super::admin::{Actor, AdminError, PluginAdmin, PluginStore};
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::sync::watch;
use turnstone_mcp::ServerConfig;
use turnstone_mcp::config::validate_name;
use turnstone_storage::types::McpServerRecord;

/// The definition as the audit log keeps it: values the operator wrote into
/// `env` and `headers` may be credentials, so only their names are kept.
fn audited(config: &ServerConfig) -> Value {
    let mut v = serde_json::to_value(config).unwrap_or(Value::Null);
    for field in ["env", "headers"] {
        if let Some(Value::Object(map)) = v.get_mut(field) {
            for value in map.values_mut() {
                *value = Value::String("…".into());
            }
        }
    }
    v
}

/// Checks a definition as every node will (name, transport, numbers).
fn check(name: &str, config: &ServerConfig) -> Result<(), AdminError> {
    let invalid = |e: turnstone_mcp::ConfigError| AdminError::Invalid(e.to_string());
    validate_name(name).map_err(invalid)?;
    config.transport(name).map_err(invalid)?;
    config.validate_numbers(name).map_err(invalid)?;
    Ok(())
}

impl PluginAdmin {
    fn hub(&self) -> Result<&Arc<turnstone_mcp::McpHub>, AdminError> {
        self.mcp()
            .ok_or_else(|| AdminError::Invalid("MCP is not running on this node".into()))
    }

    /// Creates MCP server `name` (enabled or not) with nothing granted.
    /// `config.disabled` is ignored: `enabled` decides.
    pub async fn create_mcp_server(
        &self,
        actor: &Actor,
        name: &str,
        mut config: ServerConfig,
        enabled: bool,
    ) -> Result<(), AdminError> {
        config.disabled = false;
        check(name, &config)?;
        let hub = self.hub()?;
        if self.entry(name).is_ok() {
            return Err(AdminError::Conflict(format!(
                "{name} is the name of a plugin component; MCP server names share the plugin namespace"
            )));
        }
        if hub.configured(name) {
            return Err(AdminError::Conflict(format!(
                "an MCP server named {name:?} is defined in config.toml"
            )));
        }
        let definition = serde_json::to_string(&config)
            .map_err(|e| AdminError::Invalid(format!("definition: {e}")))?;
        self.db()
            .create_mcp_server(
                &McpServerRecord {
                    name: name.to_string(),
                    definition,
                    created_by: actor.user_id.clone(),
                    created: String::new(),
                    updated: String::new(),
                },
                enabled,
            )
            .await?;
        PluginStore::new(self.db())
            .audit(
                actor,
                "plugin.mcp.create",
                name,
                json!({ "definition": audited(&config), "enabled": enabled }),
            )
            .await;
        self.sync().await?;
        Ok(())
    }

    /// Replaces the definition of run-time server `name` (grant and enabled
    /// state are kept; it restarts with the new definition).
    pub async fn update_mcp_server(
        &self,
        actor: &Actor,
        name: &str,
        mut config: ServerConfig,
    ) -> Result<(), AdminError> {
        config.disabled = false;
        // Unknown (404) or config.toml (409) before judging the new definition.
        let before = self.runtime_definition(name).await?;
        check(name, &config)?;
        let definition = serde_json::to_string(&config)
            .map_err(|e| AdminError::Invalid(format!("definition: {e}")))?;
        if !self.db().update_mcp_server(name, &definition).await? {
            return Err(AdminError::NotFound(name.to_string()));
        }
        PluginStore::new(self.db())
            .audit(
                actor,
                "plugin.mcp.update",
                name,
                json!({ "before": audited(&before), "after": audited(&config) }),
            )
            .await;
        self.sync().await?;
        Ok(())
    }

    /// Deletes run-time server `name` and its plugin row; it stops here now
    /// and on other nodes at their next poll.
    pub async fn delete_mcp_server(&self, actor: &Actor, name: &str) -> Result<(), AdminError> {
        let before = self.runtime_definition(name).await?;
        if !self.db().delete_mcp_server(name).await? {
            return Err(AdminError::NotFound(name.to_string()));
        }
        PluginStore::new(self.db())
            .audit(
                actor,
                "plugin.mcp.delete",
                name,
                json!({ "definition": audited(&before) }),
            )
            .await;
        self.sync().await?;
        Ok(())
    }

    /// The stored definition of `name`; a server from `config.toml` is a
    /// conflict (it is changed there), an unknown one not found.
    pub async fn runtime_definition(&self, name: &str) -> Result<ServerConfig, AdminError> {
        match self.db().get_mcp_server(name).await? {
            Some(r) => serde_json::from_str(&r.definition).map_err(|e| {
                AdminError::Invalid(format!("stored definition of {name} does not parse: {e}"))
            }),
            None if self.mcp().is_some_and(|h| h.configured(name)) => {
                Err(AdminError::Conflict(format!(
                    "MCP server {name} is defined in config.toml; change it there (or disable it)"
                )))
            }
            None => Err(AdminError::NotFound(name.to_string())),
        }
    }
}

/// Records each MCP server's state (`connected`, `failed`, …) and last error
/// in its `plugins` row when it changes, as [`super::admin`] does for
/// components. Only existing rows are written.
pub(super) async fn persist_mcp_states(
    admin: std::sync::Weak<PluginAdmin>,
    mut rx: watch::Receiver<u64>,
) {
    let mut recorded: std::collections::HashMap<String, (String, Option<String>)> =
        Default::default();
    loop {
        if rx.changed().await.is_err() {
            return;
        }
        let Some(admin) = admin.upgrade() else { return };
        let Some(hub) = admin.mcp() else { return };
        for server in hub.servers() {
            let now = (server.state().label().to_string(), server.last_error());
            if recorded.get(&server.name) == Some(&now) {
                continue;
            }
            match admin
                .db()
                .set_plugin_state(&server.name, &now.0, now.1.as_deref())
                .await
            {
                Ok(_) => {
                    recorded.insert(server.name.clone(), now);
                }
                Err(e) => {
                    tracing::warn!(server = %server.name, "cannot record MCP server state: {e}")
                }
            }
        }
    }
}
