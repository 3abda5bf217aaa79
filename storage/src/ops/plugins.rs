//! `PluginStore`: persisted plugin state (records, enable toggle, grants, load
//! state, reload requests), written once and expanded for each backend (see
//! the `ops` module docs).

/// Columns of `plugins`.
macro_rules! plugin_columns {
    () => {
        "name, version, kind, enabled, granted, config, state, last_error, updated, reload_seq"
    };
}

pub(crate) use plugin_columns;

/// Expands `PluginStore` for a backend whose store type has a `pool` field.
macro_rules! impl_plugin_store {
    ($store:ty, $db:ty) => {
        impl $store {
            fn plugin_from_row(
                r: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::types::PluginRecord> {
                use sqlx::Row;
                Ok($crate::types::PluginRecord {
                    name: r.try_get("name")?,
                    version: r.try_get("version")?,
                    kind: r.try_get("kind")?,
                    enabled: r.try_get("enabled")?,
                    granted: r.try_get("granted")?,
                    config: r.try_get("config")?,
                    state: r.try_get("state")?,
                    last_error: r.try_get("last_error")?,
                    updated: r.try_get("updated")?,
                    reload_seq: r.try_get("reload_seq")?,
                })
            }

            fn mcp_server_from_row(
                r: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::types::McpServerRecord> {
                use sqlx::Row;
                Ok($crate::types::McpServerRecord {
                    name: r.try_get("name")?,
                    definition: r.try_get("definition")?,
                    created_by: r.try_get("created_by")?,
                    created: r.try_get("created")?,
                    updated: r.try_get("updated")?,
                })
            }
        }

        #[async_trait::async_trait]
        impl $crate::backend::PluginStore for $store {
            async fn upsert_plugin(&self, p: &$crate::types::PluginRecord) -> $crate::error::Result<()> {
                for (field, v) in [("granted", p.granted.as_deref()), ("config", Some(p.config.as_str()))] {
                    if let Some(v) = v
                        && serde_json::from_str::<serde_json::Value>(v).is_err()
                    {
                        return Err($crate::error::StorageError::InvalidInput(format!(
                            "plugin {field} is not valid JSON"
                        )));
                    }
                }
                sqlx::query(
                    "INSERT INTO plugins (name, version, kind, enabled, granted, config, state, last_error, updated) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (name) DO UPDATE SET \
                     version = excluded.version, kind = excluded.kind, enabled = excluded.enabled, granted = excluded.granted, \
                     config = excluded.config, state = excluded.state, last_error = excluded.last_error, updated = excluded.updated",
                )
                .bind(&p.name)
                .bind(&p.version)
                .bind(&p.kind)
                .bind(p.enabled)
                .bind(&p.granted)
                .bind(&p.config)
                .bind(&p.state)
                .bind(&p.last_error)
                .bind($crate::util::now())
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn get_plugin(&self, name: &str) -> $crate::error::Result<Option<$crate::types::PluginRecord>> {
                let row = sqlx::query(concat!("SELECT ", $crate::ops::plugins::plugin_columns!(), " FROM plugins WHERE name = $1"))
                    .bind(name)
                    .fetch_optional(&self.pool)
                    .await?;
                row.as_ref().map(Self::plugin_from_row).transpose()
            }

            async fn list_plugins(&self) -> $crate::error::Result<Vec<$crate::types::PluginRecord>> {
                let rows = sqlx::query(concat!("SELECT ", $crate::ops::plugins::plugin_columns!(), " FROM plugins ORDER BY name"))
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(Self::plugin_from_row).collect()
            }

            async fn set_plugin_enabled(&self, name: &str, enabled: bool) -> $crate::error::Result<bool> {
                let n = sqlx::query("UPDATE plugins SET enabled = $2, updated = $3 WHERE name = $1")
                    .bind(name)
                    .bind(enabled)
                    .bind($crate::util::now())
                    .execute(&self.pool)
                    .await?
                    .rows_affected();
                Ok(n == 1)
            }

            async fn set_plugin_grants(&self, name: &str, granted: Option<&str>) -> $crate::error::Result<bool> {
                if let Some(g) = granted
                    && serde_json::from_str::<serde_json::Value>(g).is_err()
                {
                    return Err($crate::error::StorageError::InvalidInput("grant is not valid JSON".into()));
                }
                let n = sqlx::query("UPDATE plugins SET granted = $2, updated = $3 WHERE name = $1")
                    .bind(name)
                    .bind(granted)
                    .bind($crate::util::now())
                    .execute(&self.pool)
                    .await?
                    .rows_affected();
                Ok(n == 1)
            }

            async fn set_plugin_state(&self, name: &str, state: &str, error: Option<&str>) -> $crate::error::Result<bool> {
                let n = sqlx::query("UPDATE plugins SET state = $2, last_error = $3, updated = $4 WHERE name = $1")
                    .bind(name)
                    .bind(state)
                    .bind(error)
                    .bind($crate::util::now())
                    .execute(&self.pool)
                    .await?
                    .rows_affected();
                Ok(n == 1)
            }

            async fn request_plugin_reload(&self, name: &str) -> $crate::error::Result<bool> {
                let n = sqlx::query("UPDATE plugins SET reload_seq = reload_seq + 1, updated = $2 WHERE name = $1")
                    .bind(name)
                    .bind($crate::util::now())
                    .execute(&self.pool)
                    .await?
                    .rows_affected();
                Ok(n == 1)
            }

            async fn delete_plugin(&self, name: &str) -> $crate::error::Result<bool> {
                let n = sqlx::query("DELETE FROM plugins WHERE name = $1")
                    .bind(name)
                    .execute(&self.pool)
                    .await?
                    .rows_affected();
                Ok(n == 1)
            }

            async fn create_mcp_server(
                &self,
                s: &$crate::types::McpServerRecord,
                enabled: bool,
            ) -> $crate::error::Result<()> {
                $crate::ops::plugins::check_definition(&s.definition)?;
                let now = $crate::util::now();
                let mut tx = self.begin_write().await?;
                let taken: Option<String> = sqlx::query_scalar("SELECT name FROM mcp_servers WHERE name = $1")
                    .bind(&s.name)
                    .fetch_optional(&mut *tx)
                    .await?;
                if taken.is_some() {
                    return Err($crate::error::StorageError::McpServerExists(s.name.clone()));
                }
                sqlx::query("INSERT INTO mcp_servers (name, definition, created_by, created, updated) VALUES ($1, $2, $3, $4, $4)")
                    .bind(&s.name)
                    .bind(&s.definition)
                    .bind(&s.created_by)
                    .bind(&now)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| match &e {
                        // A concurrent create on PostgreSQL (SQLite holds the write lock).
                        sqlx::Error::Database(d) if d.is_unique_violation() => {
                            $crate::error::StorageError::McpServerExists(s.name.clone())
                        }
                        _ => $crate::error::StorageError::Database(e),
                    })?;
                sqlx::query(
                    "INSERT INTO plugins (name, version, kind, enabled, granted, config, state, last_error, updated, reload_seq) \
                     VALUES ($1, '', 'mcp', $2, NULL, '{}', 'unknown', NULL, $3, 0) ON CONFLICT (name) DO UPDATE SET \
                     version = '', kind = 'mcp', enabled = excluded.enabled, granted = NULL, config = '{}', \
                     state = 'unknown', last_error = NULL, updated = excluded.updated, reload_seq = 0",
                )
                .bind(&s.name)
                .bind(enabled)
                .bind(&now)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(())
            }

            async fn update_mcp_server(&self, name: &str, definition: &str) -> $crate::error::Result<bool> {
                $crate::ops::plugins::check_definition(definition)?;
                let n = sqlx::query("UPDATE mcp_servers SET definition = $2, updated = $3 WHERE name = $1")
                    .bind(name)
                    .bind(definition)
                    .bind($crate::util::now())
                    .execute(&self.pool)
                    .await?
                    .rows_affected();
                Ok(n == 1)
            }

            async fn delete_mcp_server(&self, name: &str) -> $crate::error::Result<bool> {
                let mut tx = self.begin_write().await?;
                let n = sqlx::query("DELETE FROM mcp_servers WHERE name = $1")
                    .bind(name)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if n == 1 {
                    sqlx::query("DELETE FROM plugins WHERE name = $1 AND kind = 'mcp'")
                        .bind(name)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(n == 1)
            }

            async fn get_mcp_server(&self, name: &str) -> $crate::error::Result<Option<$crate::types::McpServerRecord>> {
                let row = sqlx::query("SELECT name, definition, created_by, created, updated FROM mcp_servers WHERE name = $1")
                    .bind(name)
                    .fetch_optional(&self.pool)
                    .await?;
                row.as_ref().map(Self::mcp_server_from_row).transpose()
            }

            async fn list_mcp_servers(&self) -> $crate::error::Result<Vec<$crate::types::McpServerRecord>> {
                let rows = sqlx::query("SELECT name, definition, created_by, created, updated FROM mcp_servers ORDER BY name")
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(Self::mcp_server_from_row).collect()
            }
        }
    };
}

pub(crate) use impl_plugin_store;

/// A server definition must be a JSON object (its fields are checked by the
/// MCP layer, which knows them).
pub(crate) fn check_definition(definition: &str) -> crate::error::Result<()> {
    match serde_json::from_str::<serde_json::Value>(definition) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        _ => Err(crate::error::StorageError::InvalidInput(
            "an MCP server definition must be a JSON object".into(),
        )),
    }
}
