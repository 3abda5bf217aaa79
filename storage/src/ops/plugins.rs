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
        }
    };
}

pub(crate) use impl_plugin_store;
