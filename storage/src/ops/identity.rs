//! `IdentityStore`: users, API tokens and chat-platform identities, written
//! once and expanded for each backend (see the `ops` module docs).

/// Columns of `users`.
macro_rules! user_columns {
    () => {
        "user_id, username, display_name, password_hash, role, created"
    };
}

/// Columns of `api_tokens` returned to callers (never `token_hash`).
macro_rules! api_token_columns {
    () => {
        "token_id, token_prefix, user_id, name, scopes, created, expires, last_used"
    };
}

pub(crate) use {api_token_columns, user_columns};

/// SHA-256 hex of a raw API token: only the hash is stored, so the database
/// never holds a usable token.
pub(crate) fn token_hash(raw: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(raw.as_bytes()))
}

/// Expands `IdentityStore` for a backend whose store type has a `pool` field.
macro_rules! impl_identity_store {
    ($store:ty, $db:ty) => {
        impl $store {
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
                    $crate::ops::identity::user_columns!()
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
                let row = sqlx::query(concat!("SELECT ", $crate::ops::identity::user_columns!(), " FROM users WHERE user_id = $1"))
                    .bind(user_id)
                    .fetch_optional(&self.pool)
                    .await?;
                row.as_ref().map(Self::user_from_row).transpose()
            }

            async fn get_user_by_name(&self, username: &str) -> $crate::error::Result<Option<$crate::types::User>> {
                let row = sqlx::query(concat!("SELECT ", $crate::ops::identity::user_columns!(), " FROM users WHERE username = $1"))
                    .bind(username)
                    .fetch_optional(&self.pool)
                    .await?;
                row.as_ref().map(Self::user_from_row).transpose()
            }

            async fn list_users(&self) -> $crate::error::Result<Vec<$crate::types::User>> {
                let rows = sqlx::query(concat!("SELECT ", $crate::ops::identity::user_columns!(), " FROM users ORDER BY username"))
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
                    $crate::ops::identity::api_token_columns!()
                ))
                .bind($crate::util::random_hex(16))
                .bind($crate::ops::identity::token_hash(&raw))
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
                    $crate::ops::identity::api_token_columns!()
                ))
                .bind($crate::ops::identity::token_hash(raw))
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
                    $crate::ops::identity::api_token_columns!(),
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
    };
}

pub(crate) use impl_identity_store;
