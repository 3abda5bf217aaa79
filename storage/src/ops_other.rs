//! Memories, identity, plugins, audit, usage and services — written once and
//! expanded for each backend.

macro_rules! mem_cols {
    () => {
        "memory_id, name, description, type, scope, scope_id, content, created, updated, last_accessed, access_count"
    };
}

macro_rules! user_cols {
    () => {
        "user_id, username, display_name, password_hash, role, created"
    };
}

macro_rules! token_cols {
    () => {
        "token_id, token_prefix, user_id, name, scopes, created, expires, last_used"
    };
}

macro_rules! plugin_cols {
    () => {
        "name, version, kind, enabled, granted, config, state, last_error, updated, reload_seq"
    };
}

pub(crate) use {mem_cols, plugin_cols, token_cols, user_cols};

/// SHA-256 hex of a raw API token.
pub(crate) fn token_hash(raw: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(raw.as_bytes()))
}

pub(crate) fn check_memory(m: &crate::types::NewMemory) -> crate::error::Result<(String, String)> {
    use crate::error::StorageError;
    let ty = m.memory_type.clone().unwrap_or_else(|| "project".into());
    let scope = m.scope.clone().unwrap_or_else(|| "global".into());
    if !crate::types::MEMORY_TYPES.contains(&ty.as_str()) {
        return Err(StorageError::InvalidInput(format!(
            "memory type {ty:?} must be one of {:?}",
            crate::types::MEMORY_TYPES
        )));
    }
    if !crate::types::MEMORY_SCOPES.contains(&scope.as_str()) {
        return Err(StorageError::InvalidInput(format!(
            "memory scope {scope:?} must be one of {:?}",
            crate::types::MEMORY_SCOPES
        )));
    }
    if scope != "global" && m.scope_id.is_empty() {
        return Err(StorageError::InvalidInput(format!(
            "a {scope}-scoped memory needs a scope_id"
        )));
    }
    if m.name.is_empty() || m.name.len() > 128 {
        return Err(StorageError::InvalidInput(
            "memory name must be 1-128 bytes".into(),
        ));
    }
    if m.content.len() > crate::types::MAX_CONTENT_BYTES {
        return Err(StorageError::TooLarge {
            field: "content",
            size: m.content.len(),
            limit: crate::types::MAX_CONTENT_BYTES,
        });
    }
    if [&m.name, &m.description, &m.content, &m.scope_id]
        .iter()
        .any(|s| s.contains('\0'))
    {
        return Err(StorageError::InvalidInput(
            "memory fields must not contain NUL".into(),
        ));
    }
    Ok((ty, scope))
}

macro_rules! impl_other {
    ($store:ty, $db:ty) => {
        impl $store {
            fn memory_from_row(
                r: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::types::Memory> {
                use sqlx::Row;
                Ok($crate::types::Memory {
                    memory_id: r.try_get("memory_id")?,
                    name: r.try_get("name")?,
                    description: r.try_get("description")?,
                    memory_type: r.try_get("type")?,
                    scope: r.try_get("scope")?,
                    scope_id: r.try_get("scope_id")?,
                    content: r.try_get("content")?,
                    created: r.try_get("created")?,
                    updated: r.try_get("updated")?,
                    last_accessed: r.try_get("last_accessed")?,
                    access_count: r.try_get("access_count")?,
                })
            }

            fn user_from_row(r: &<$db as sqlx::Database>::Row) -> $crate::error::Result<$crate::types::User> {
                use sqlx::Row;
                Ok($crate::types::User {
                    user_id: r.try_get("user_id")?,
                    username: r.try_get("username")?,
                    display_name: r.try_get("display_name")?,
                    password_hash: r.try_get("password_hash")?,
                    role: r.try_get("role")?,
                    created: r.try_get("created")?,
                })
            }

            fn token_from_row(
                r: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::types::ApiToken> {
                use sqlx::Row;
                let scopes: String = r.try_get("scopes")?;
                Ok($crate::types::ApiToken {
                    token_id: r.try_get("token_id")?,
                    token_prefix: r.try_get("token_prefix")?,
                    user_id: r.try_get("user_id")?,
                    name: r.try_get("name")?,
                    scopes: scopes
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect(),
                    created: r.try_get("created")?,
                    expires: r.try_get("expires")?,
                    last_used: r.try_get("last_used")?,
                })
            }

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

            async fn touch_memories(&self, ids: &[String]) -> $crate::error::Result<()> {
                let now = $crate::util::now();
                for id in ids {
                    sqlx::query(
                        "UPDATE structured_memories SET access_count = access_count + 1, last_accessed = $2 WHERE memory_id = $1",
                    )
                    .bind(id)
                    .bind(&now)
                    .execute(&self.pool)
                    .await?;
                }
                Ok(())
            }
        }

        #[async_trait::async_trait]
        impl $crate::backend::MemoryStore for $store {
            async fn save_memory(
                &self,
                m: &$crate::types::NewMemory,
            ) -> $crate::error::Result<$crate::types::Memory> {
                let (ty, scope) = $crate::ops_other::check_memory(m)?;
                let now = $crate::util::now();
                let row = sqlx::query(concat!(
                    "INSERT INTO structured_memories (memory_id, name, description, type, scope, scope_id, content, created, updated) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) \
                     ON CONFLICT (name, scope, scope_id) DO UPDATE SET description = excluded.description, \
                     type = excluded.type, content = excluded.content, updated = excluded.updated RETURNING ",
                    $crate::ops_other::mem_cols!()
                ))
                .bind($crate::util::random_hex(16))
                .bind(&m.name)
                .bind(&m.description)
                .bind(&ty)
                .bind(&scope)
                .bind(&m.scope_id)
                .bind(&m.content)
                .bind(&now)
                .fetch_one(&self.pool)
                .await?;
                Self::memory_from_row(&row)
            }

            async fn get_memory(
                &self,
                name: &str,
                scope: &str,
                scope_id: &str,
            ) -> $crate::error::Result<Option<$crate::types::Memory>> {
                let row = sqlx::query(concat!(
                    "UPDATE structured_memories SET access_count = access_count + 1, last_accessed = $4 \
                     WHERE name = $1 AND scope = $2 AND scope_id = $3 RETURNING ",
                    $crate::ops_other::mem_cols!()
                ))
                .bind(name)
                .bind(scope)
                .bind(scope_id)
                .bind($crate::util::now())
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(Self::memory_from_row).transpose()
            }

            async fn delete_memory(&self, name: &str, scope: &str, scope_id: &str) -> $crate::error::Result<bool> {
                let n = sqlx::query(
                    "DELETE FROM structured_memories WHERE name = $1 AND scope = $2 AND scope_id = $3",
                )
                .bind(name)
                .bind(scope)
                .bind(scope_id)
                .execute(&self.pool)
                .await?
                .rows_affected();
                Ok(n == 1)
            }

            async fn list_memories(
                &self,
                memory_type: Option<&str>,
                scope: Option<&str>,
                limit: i64,
            ) -> $crate::error::Result<Vec<$crate::types::Memory>> {
                let rows = sqlx::query(concat!(
                    "SELECT ",
                    $crate::ops_other::mem_cols!(),
                    " FROM structured_memories WHERE ($1 IS NULL OR type = $1) AND ($2 IS NULL OR scope = $2) \
                     ORDER BY updated DESC, memory_id LIMIT $3"
                ))
                .bind(memory_type)
                .bind(scope)
                .bind(limit.clamp(1, 1000))
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::memory_from_row).collect()
            }

            async fn search_memories(
                &self,
                query: &str,
                limit: i64,
            ) -> $crate::error::Result<Vec<$crate::types::Memory>> {
                let tokens = $crate::util::search_tokens(query);
                if tokens.is_empty() {
                    return Ok(Vec::new());
                }
                let mut qb = sqlx::QueryBuilder::<$db>::new(concat!(
                    "SELECT ",
                    $crate::ops_other::mem_cols!(),
                    " FROM structured_memories WHERE 1 = 1"
                ));
                for t in &tokens {
                    qb.push(" AND lower(name || ' ' || description || ' ' || content) LIKE ")
                        .push_bind(format!("%{}%", $crate::util::like_escape(t)))
                        .push(" ESCAPE '\\'");
                }
                qb.push(" ORDER BY updated DESC, memory_id LIMIT ")
                    .push_bind(limit.clamp(1, 1000));
                let rows = qb.build().fetch_all(&self.pool).await?;
                let found: Vec<$crate::types::Memory> =
                    rows.iter().map(Self::memory_from_row).collect::<$crate::error::Result<_>>()?;
                let ids: Vec<String> = found.iter().map(|m| m.memory_id.clone()).collect();
                self.touch_memories(&ids).await?;
                Ok(found)
            }
        }

        #[async_trait::async_trait]
        impl $crate::backend::IdentityStore for $store {
            async fn create_user(
                &self,
                username: &str,
                display_name: &str,
                password_hash: &str,
                role: &str,
            ) -> $crate::error::Result<$crate::types::User> {
                let bad = username.is_empty()
                    || username.len() > 128
                    || username.chars().any(|c| c.is_control() || c.is_whitespace());
                if bad {
                    return Err($crate::error::StorageError::InvalidInput(
                        "username must be 1-128 characters without spaces or control characters".into(),
                    ));
                }
                let row = sqlx::query(concat!(
                    "INSERT INTO users (user_id, username, display_name, password_hash, role, created) \
                     VALUES ($1, $2, $3, $4, $5, $6) RETURNING ",
                    $crate::ops_other::user_cols!()
                ))
                .bind($crate::util::random_hex(16))
                .bind(username)
                .bind(display_name)
                .bind(password_hash)
                .bind(role)
                .bind($crate::util::now())
                .fetch_one(&self.pool)
                .await
                .map_err(|e| $crate::error::classify(e, username))?;
                Self::user_from_row(&row)
            }

            async fn get_user(&self, user_id: &str) -> $crate::error::Result<Option<$crate::types::User>> {
                let row = sqlx::query(concat!("SELECT ", $crate::ops_other::user_cols!(), " FROM users WHERE user_id = $1"))
                    .bind(user_id)
                    .fetch_optional(&self.pool)
                    .await?;
                row.as_ref().map(Self::user_from_row).transpose()
            }

            async fn get_user_by_name(&self, username: &str) -> $crate::error::Result<Option<$crate::types::User>> {
                let row = sqlx::query(concat!("SELECT ", $crate::ops_other::user_cols!(), " FROM users WHERE username = $1"))
                    .bind(username)
                    .fetch_optional(&self.pool)
                    .await?;
                row.as_ref().map(Self::user_from_row).transpose()
            }

            async fn list_users(&self) -> $crate::error::Result<Vec<$crate::types::User>> {
                let rows = sqlx::query(concat!("SELECT ", $crate::ops_other::user_cols!(), " FROM users ORDER BY username"))
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(Self::user_from_row).collect()
            }

            async fn count_users(&self) -> $crate::error::Result<i64> {
                Ok(sqlx::query_scalar("SELECT COUNT(*) FROM users").fetch_one(&self.pool).await?)
            }

            async fn delete_user(&self, user_id: &str) -> $crate::error::Result<bool> {
                let n = sqlx::query("DELETE FROM users WHERE user_id = $1")
                    .bind(user_id)
                    .execute(&self.pool)
                    .await?
                    .rows_affected();
                Ok(n == 1)
            }

            async fn create_api_token(
                &self,
                user_id: &str,
                name: &str,
                scopes: &[String],
                expires: Option<&str>,
            ) -> $crate::error::Result<(String, $crate::types::ApiToken)> {
                if scopes.iter().any(|s| s.is_empty() || s.contains(',')) {
                    return Err($crate::error::StorageError::InvalidInput(
                        "scopes must be non-empty and must not contain commas".into(),
                    ));
                }
                if let Some(e) = expires
                    && $crate::util::parse_ts(e).is_none()
                {
                    return Err($crate::error::StorageError::InvalidInput(format!(
                        "expiry {e:?} is not an RFC 3339 timestamp"
                    )));
                }
                let raw = format!("ts_{}", $crate::util::random_hex(32));
                let row = sqlx::query(concat!(
                    "INSERT INTO api_tokens (token_id, token_hash, token_prefix, user_id, name, scopes, created, expires) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING ",
                    $crate::ops_other::token_cols!()
                ))
                .bind($crate::util::random_hex(16))
                .bind($crate::ops_other::token_hash(&raw))
                .bind(&raw[..8])
                .bind(user_id)
                .bind(name)
                .bind(scopes.join(","))
                .bind($crate::util::now())
                .bind(expires)
                .fetch_one(&self.pool)
                .await
                .map_err(|e| $crate::error::classify_user(e, user_id))?;
                Ok((raw, Self::token_from_row(&row)?))
            }

            async fn verify_api_token(
                &self,
                raw: &str,
            ) -> $crate::error::Result<Option<($crate::types::ApiToken, $crate::types::User)>> {
                if !raw.starts_with("ts_") || raw.len() != 67 {
                    return Ok(None);
                }
                let row = sqlx::query(concat!(
                    "UPDATE api_tokens SET last_used = $2 WHERE token_hash = $1 AND (expires IS NULL OR expires > $2) RETURNING ",
                    $crate::ops_other::token_cols!()
                ))
                .bind($crate::ops_other::token_hash(raw))
                .bind($crate::util::now())
                .fetch_optional(&self.pool)
                .await?;
                let Some(row) = row else { return Ok(None) };
                let token = Self::token_from_row(&row)?;
                Ok(self.get_user(&token.user_id).await?.map(|u| (token, u)))
            }

            async fn list_api_tokens(
                &self,
                user_id: Option<&str>,
            ) -> $crate::error::Result<Vec<$crate::types::ApiToken>> {
                let rows = sqlx::query(concat!(
                    "SELECT ",
                    $crate::ops_other::token_cols!(),
                    " FROM api_tokens WHERE ($1 IS NULL OR user_id = $1) ORDER BY created, token_id"
                ))
                .bind(user_id)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::token_from_row).collect()
            }

            async fn revoke_api_token(&self, token_id: &str) -> $crate::error::Result<bool> {
                let n = sqlx::query("DELETE FROM api_tokens WHERE token_id = $1")
                    .bind(token_id)
                    .execute(&self.pool)
                    .await?
                    .rows_affected();
                Ok(n == 1)
            }

            async fn link_channel_user(
                &self,
                channel_type: &str,
                channel_user_id: &str,
                user_id: &str,
            ) -> $crate::error::Result<()> {
                sqlx::query(
                    "INSERT INTO channel_users (channel_type, channel_user_id, user_id, created) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (channel_type, channel_user_id) DO UPDATE SET user_id = excluded.user_id",
                )
                .bind(channel_type)
                .bind(channel_user_id)
                .bind(user_id)
                .bind($crate::util::now())
                .execute(&self.pool)
                .await
                .map_err(|e| $crate::error::classify_user(e, user_id))?;
                Ok(())
            }

            async fn channel_user(
                &self,
                channel_type: &str,
                channel_user_id: &str,
            ) -> $crate::error::Result<Option<String>> {
                Ok(sqlx::query_scalar(
                    "SELECT user_id FROM channel_users WHERE channel_type = $1 AND channel_user_id = $2",
                )
                .bind(channel_type)
                .bind(channel_user_id)
                .fetch_optional(&self.pool)
                .await?)
            }
        }

        #[async_trait::async_trait]
        impl $crate::backend::OpsStore for $store {
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
                let row = sqlx::query(concat!("SELECT ", $crate::ops_other::plugin_cols!(), " FROM plugins WHERE name = $1"))
                    .bind(name)
                    .fetch_optional(&self.pool)
                    .await?;
                row.as_ref().map(Self::plugin_from_row).transpose()
            }

            async fn list_plugins(&self) -> $crate::error::Result<Vec<$crate::types::PluginRecord>> {
                let rows = sqlx::query(concat!("SELECT ", $crate::ops_other::plugin_cols!(), " FROM plugins ORDER BY name"))
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

            async fn append_audit(&self, e: &$crate::types::AuditEntry) -> $crate::error::Result<i64> {
                Ok(sqlx::query_scalar(
                    "INSERT INTO audit_log (timestamp, user_id, action, target, detail, ip) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
                )
                .bind($crate::util::now())
                .bind(&e.user_id)
                .bind(&e.action)
                .bind(&e.target)
                .bind(&e.detail)
                .bind(&e.ip)
                .fetch_one(&self.pool)
                .await?)
            }

            async fn list_audit(&self, limit: i64) -> $crate::error::Result<Vec<$crate::types::AuditEntry>> {
                let rows: Vec<(i64, String, Option<String>, String, Option<String>, Option<String>, Option<String>)> =
                    sqlx::query_as(
                        "SELECT id, timestamp, user_id, action, target, detail, ip FROM audit_log ORDER BY id DESC LIMIT $1",
                    )
                    .bind(limit.clamp(1, 10_000))
                    .fetch_all(&self.pool)
                    .await?;
                Ok(rows
                    .into_iter()
                    .map(|(id, timestamp, user_id, action, target, detail, ip)| $crate::types::AuditEntry {
                        id,
                        timestamp,
                        user_id,
                        action,
                        target,
                        detail,
                        ip,
                    })
                    .collect())
            }

            async fn record_usage(&self, u: &$crate::types::UsageEvent) -> $crate::error::Result<()> {
                sqlx::query(
                    "INSERT INTO usage_events (timestamp, user_id, ws_id, model, prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, tool_calls) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                )
                .bind($crate::util::now())
                .bind(&u.user_id)
                .bind(&u.ws_id)
                .bind(&u.model)
                .bind(u.prompt_tokens)
                .bind(u.completion_tokens)
                .bind(u.cached_tokens)
                .bind(u.reasoning_tokens)
                .bind(u.tool_calls)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn heartbeat(&self, s: &$crate::types::ServiceRecord) -> $crate::error::Result<()> {
                let now = $crate::util::now();
                sqlx::query(
                    "INSERT INTO services (service_id, kind, node_id, url, version, started, last_heartbeat) \
                     VALUES ($1, $2, $3, $4, $5, $6, $6) ON CONFLICT (service_id) DO UPDATE SET \
                     kind = excluded.kind, node_id = excluded.node_id, url = excluded.url, version = excluded.version, \
                     last_heartbeat = excluded.last_heartbeat",
                )
                .bind(&s.service_id)
                .bind(&s.kind)
                .bind(&s.node_id)
                .bind(&s.url)
                .bind(&s.version)
                .bind(&now)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn live_services(
                &self,
                within: std::time::Duration,
            ) -> $crate::error::Result<Vec<$crate::types::ServiceRecord>> {
                let rows: Vec<(String, String, String, Option<String>, Option<String>, String, String)> = sqlx::query_as(
                    "SELECT service_id, kind, node_id, url, version, started, last_heartbeat FROM services \
                     WHERE last_heartbeat > $1 ORDER BY service_id",
                )
                .bind($crate::util::ago(within))
                .fetch_all(&self.pool)
                .await?;
                Ok(rows
                    .into_iter()
                    .map(|(service_id, kind, node_id, url, version, started, last_heartbeat)| {
                        $crate::types::ServiceRecord { service_id, kind, node_id, url, version, started, last_heartbeat }
                    })
                    .collect())
            }
        }
    };
}

pub(crate) use impl_other;
