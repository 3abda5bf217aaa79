//! `NotifyStore`: notification targets, each a user's (for all their
//! workstreams) or one workstream's; names are unique in their place.

/// Columns of `notify_targets`.
macro_rules! notify_columns {
    () => {
        "target_id, user_id, ws_id, name, kind, url, secret, channel_type, channel_id, created"
    };
}

pub(crate) use notify_columns;

/// Checks a target before it is saved.
pub(crate) fn check_target(t: &crate::types::NewNotifyTarget) -> crate::error::Result<()> {
    let bad = |m: String| Err(crate::error::StorageError::InvalidInput(m));
    let name_ok = !t.name.is_empty()
        && t.name.len() <= 64
        && t.name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if !name_ok {
        return bad(format!(
            "target name {:?} must be 1-64 letters, digits, '-', '_' or '.'",
            t.name
        ));
    }
    match t.kind.as_str() {
        "webhook" => {
            let url = t.url.as_deref().unwrap_or("");
            if !(url.starts_with("https://") || url.starts_with("http://")) || url.len() > 2048 {
                return bad(format!("webhook target {:?} needs an http(s) url", t.name));
            }
        }
        "channel" => {
            if t.channel_type.as_deref().unwrap_or("").is_empty()
                || t.channel_id.as_deref().unwrap_or("").is_empty()
            {
                return bad(format!(
                    "channel target {:?} needs channel_type and channel_id",
                    t.name
                ));
            }
        }
        other => return bad(format!("target kind {other:?} must be webhook or channel")),
    }
    if t.user_id.is_none() && t.ws_id.is_none() {
        return bad("a target belongs to a user or a workstream".into());
    }
    Ok(())
}

/// Expands `NotifyStore` for a backend.
macro_rules! impl_notify_store {
    ($store:ty, $db:ty) => {
        impl $store {
            fn target_from_row(
                r: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::types::NotifyTarget> {
                use sqlx::Row;
                Ok($crate::types::NotifyTarget {
                    target_id: r.try_get("target_id")?,
                    user_id: r.try_get("user_id")?,
                    ws_id: r.try_get("ws_id")?,
                    name: r.try_get("name")?,
                    kind: r.try_get("kind")?,
                    url: r.try_get("url")?,
                    secret: r.try_get("secret")?,
                    channel_type: r.try_get("channel_type")?,
                    channel_id: r.try_get("channel_id")?,
                    created: r.try_get("created")?,
                })
            }
        }

        #[async_trait::async_trait]
        impl $crate::backend::NotifyStore for $store {
            async fn save_notify_target(
                &self,
                t: &$crate::types::NewNotifyTarget,
            ) -> $crate::error::Result<$crate::types::NotifyTarget> {
                $crate::ops::notify::check_target(t)?;
                let mut tx = self.begin_write().await?;
                sqlx::query(
                    "DELETE FROM notify_targets WHERE name = $1 AND \
                     ((CAST($2 AS TEXT) IS NOT NULL AND ws_id = $2) OR (CAST($2 AS TEXT) IS NULL AND ws_id IS NULL AND user_id = $3))",
                )
                .bind(&t.name)
                .bind(&t.ws_id)
                .bind(&t.user_id)
                .execute(&mut *tx)
                .await?;
                let row = sqlx::query(concat!(
                    "INSERT INTO notify_targets (target_id, user_id, ws_id, name, kind, url, secret, channel_type, channel_id, created) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING ",
                    $crate::ops::notify::notify_columns!()
                ))
                .bind($crate::util::random_hex(16))
                .bind(&t.user_id)
                .bind(&t.ws_id)
                .bind(&t.name)
                .bind(&t.kind)
                .bind(&t.url)
                .bind(&t.secret)
                .bind(&t.channel_type)
                .bind(&t.channel_id)
                .bind($crate::util::now())
                .fetch_one(&mut *tx)
                .await
                .map_err(|e| $crate::error::classify(e, t.ws_id.as_deref().unwrap_or("")))?;
                let target = Self::target_from_row(&row)?;
                tx.commit().await?;
                Ok(target)
            }

            async fn list_notify_targets(
                &self,
                user_id: Option<&str>,
                ws_id: Option<&str>,
            ) -> $crate::error::Result<Vec<$crate::types::NotifyTarget>> {
                let rows = sqlx::query(concat!(
                    "SELECT ",
                    $crate::ops::notify::notify_columns!(),
                    " FROM notify_targets WHERE (ws_id IS NULL AND user_id = $1) OR ws_id = $2 \
                     ORDER BY name, ws_id"
                ))
                .bind(user_id)
                .bind(ws_id)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::target_from_row).collect()
            }

            async fn delete_notify_target(
                &self,
                user_id: Option<&str>,
                ws_id: Option<&str>,
                name: &str,
            ) -> $crate::error::Result<bool> {
                let n = sqlx::query(
                    "DELETE FROM notify_targets WHERE name = $1 AND \
                     ((CAST($2 AS TEXT) IS NOT NULL AND ws_id = $2) OR (CAST($2 AS TEXT) IS NULL AND ws_id IS NULL AND user_id = $3))",
                )
                .bind(name)
                .bind(ws_id)
                .bind(user_id)
                .execute(&self.pool)
                .await?
                .rows_affected();
                Ok(n > 0)
            }
        }
    };
}

pub(crate) use impl_notify_store;
