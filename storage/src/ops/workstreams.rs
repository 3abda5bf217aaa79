//! `WorkstreamStore`: the workstream lifecycle (atomic create → publish,
//! discard, resolve, list, fork, prune, reap) and per-workstream config, written
//! once and expanded for each backend (see the `ops` module docs).

/// Columns of `workstreams` returned to callers (never `incarnation`, the
/// private reservation token).
macro_rules! workstream_columns {
    () => {
        "ws_id, node_id, user_id, alias, title, name, state, kind, parent_ws_id, project_id, persona, skill_id, skill_version, created, updated"
    };
}

pub(crate) use workstream_columns;

/// Reserved config key prefix: keys under it hold storage's own state (such as
/// the compaction checkpoint), so callers can neither set nor see them.
pub(crate) const RESERVED_PREFIX: &str = "_turnstone.";

/// Checks an alias (1-64 letters, digits, `-`, `_` or `.`) before it reaches the
/// database, so a bad one is a typed `InvalidInput` rather than a driver error.
pub(crate) fn validate_alias(alias: &str) -> crate::error::Result<()> {
    let ok = !alias.is_empty()
        && alias.len() <= 64
        && alias
            .chars()
            .all(|c| c.is_alphanumeric() || "-_.".contains(c));
    if ok {
        Ok(())
    } else {
        Err(crate::error::StorageError::InvalidInput(format!(
            "alias {alias:?} must be 1-64 letters, digits, '-', '_' or '.'"
        )))
    }
}

/// Checks a caller-chosen id (1-128 characters of `[A-Za-z0-9_-]`); `what`
/// names the field in the error message.
pub(crate) fn validate_id(what: &str, id: &str) -> crate::error::Result<()> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c));
    if ok {
        Ok(())
    } else {
        Err(crate::error::StorageError::InvalidInput(format!(
            "{what} {id:?} must be 1-128 characters of [A-Za-z0-9_-]"
        )))
    }
}

/// Expands `WorkstreamStore` for a backend whose store type has a `pool` field
/// and a `begin_write` method. Forking copies turns with the row helpers of
/// `impl_turn_store!`, which must be expanded for the same store.
macro_rules! impl_workstream_store {
    ($store:ty, $db:ty) => {
        impl $store {
            fn ws_from_row(
                r: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::types::Workstream> {
                use sqlx::Row;
                Ok($crate::types::Workstream {
                    ws_id: r.try_get("ws_id")?,
                    node_id: r.try_get("node_id")?,
                    user_id: r.try_get("user_id")?,
                    alias: r.try_get("alias")?,
                    title: r.try_get("title")?,
                    name: r.try_get("name")?,
                    state: $crate::types::WorkstreamState::parse(r.try_get::<&str, _>("state")?)?,
                    kind: r.try_get("kind")?,
                    parent_ws_id: r.try_get("parent_ws_id")?,
                    project_id: r.try_get("project_id")?,
                    persona: r.try_get("persona")?,
                    skill_id: r.try_get("skill_id")?,
                    skill_version: r.try_get("skill_version")?,
                    created: r.try_get("created")?,
                    updated: r.try_get("updated")?,
                })
            }

            async fn published_exists(
                conn: &mut <$db as sqlx::Database>::Connection,
                ws_id: &str,
            ) -> $crate::error::Result<bool> {
                Ok(sqlx::query_scalar::<_, String>(
                    "SELECT state FROM workstreams WHERE ws_id = $1",
                )
                .bind(ws_id)
                .fetch_optional(&mut *conn)
                .await?
                .is_some_and(|s| s != "creating"))
            }
        }

        #[async_trait::async_trait]
        impl $crate::backend::WorkstreamStore for $store {
            async fn create_workstream(
                &self,
                new: &$crate::types::NewWorkstream,
            ) -> $crate::error::Result<$crate::types::Reservation> {
                let ws_id = new.ws_id.clone().unwrap_or_else(|| $crate::util::random_hex(16));
                $crate::ops::workstreams::validate_id("ws_id", &ws_id)?;
                if let Some(a) = &new.alias {
                    $crate::ops::workstreams::validate_alias(a)?;
                }
                if new.name.len() > 512 || new.name.contains('\0') {
                    return Err($crate::error::StorageError::InvalidInput(
                        "name is longer than 512 bytes or contains NUL".into(),
                    ));
                }
                let token = $crate::util::random_hex(16);
                let now = $crate::util::now();
                sqlx::query(
                    "INSERT INTO workstreams (ws_id, node_id, user_id, alias, title, name, state, kind, parent_ws_id, project_id, persona, skill_id, skill_version, incarnation, created, updated) \
                     VALUES ($1, $2, $3, $4, $5, $6, 'creating', $7, $8, $9, $10, $11, $12, $13, $14, $14)",
                )
                .bind(&ws_id)
                .bind(&new.node_id)
                .bind(&new.user_id)
                .bind(&new.alias)
                .bind(&new.title)
                .bind(&new.name)
                .bind(new.kind.as_deref().unwrap_or("interactive"))
                .bind(&new.parent_ws_id)
                .bind(&new.project_id)
                .bind(&new.persona)
                .bind(&new.skill_id)
                .bind(new.skill_version)
                .bind(&token)
                .bind(&now)
                .execute(&self.pool)
                .await
                .map_err(|e| {
                    let subject = match $crate::error::classify_peek(&e) {
                        Some("alias") => new.alias.clone().unwrap_or_default(),
                        _ => ws_id.clone(),
                    };
                    $crate::error::classify(e, &subject)
                })?;
                Ok($crate::types::Reservation { ws_id, token })
            }

            async fn publish_workstream(
                &self,
                r: &$crate::types::Reservation,
            ) -> $crate::error::Result<bool> {
                let n = sqlx::query(
                    "UPDATE workstreams SET state = 'idle', updated = $3 WHERE ws_id = $1 AND incarnation = $2 AND state = 'creating'",
                )
                .bind(&r.ws_id)
                .bind(&r.token)
                .bind($crate::util::now())
                .execute(&self.pool)
                .await?
                .rows_affected();
                Ok(n == 1)
            }

            async fn discard_workstream(
                &self,
                r: &$crate::types::Reservation,
            ) -> $crate::error::Result<bool> {
                let n = sqlx::query(
                    "DELETE FROM workstreams WHERE ws_id = $1 AND incarnation = $2 AND state = 'creating'",
                )
                .bind(&r.ws_id)
                .bind(&r.token)
                .execute(&self.pool)
                .await?
                .rows_affected();
                Ok(n == 1)
            }

            async fn get_workstream(
                &self,
                ws_id: &str,
            ) -> $crate::error::Result<Option<$crate::types::Workstream>> {
                let row = sqlx::query(concat!(
                    "SELECT ",
                    $crate::ops::workstreams::workstream_columns!(),
                    " FROM workstreams WHERE ws_id = $1 AND state <> 'creating'"
                ))
                .bind(ws_id)
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(Self::ws_from_row).transpose()
            }

            async fn list_children(
                &self,
                parent_ws_id: &str,
            ) -> $crate::error::Result<Vec<$crate::types::Workstream>> {
                let rows = sqlx::query(concat!(
                    "SELECT ",
                    $crate::ops::workstreams::workstream_columns!(),
                    " FROM workstreams WHERE parent_ws_id = $1 AND state <> 'creating' ORDER BY created, ws_id"
                ))
                .bind(parent_ws_id)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::ws_from_row).collect()
            }

            async fn resolve_workstream(
                &self,
                query: &str,
            ) -> $crate::error::Result<$crate::types::Workstream> {
                let q = query.trim();
                if q.is_empty() || q.len() > 128 {
                    return Err($crate::error::StorageError::InvalidInput(
                        "workstream reference must be 1-128 characters".into(),
                    ));
                }
                if let Some(ws) = self.get_workstream(q).await? {
                    return Ok(ws);
                }
                let by_alias = sqlx::query(concat!(
                    "SELECT ",
                    $crate::ops::workstreams::workstream_columns!(),
                    " FROM workstreams WHERE alias = $1 AND state <> 'creating'"
                ))
                .bind(q)
                .fetch_optional(&self.pool)
                .await?;
                if let Some(row) = by_alias {
                    return Self::ws_from_row(&row);
                }
                let pattern = format!("{}%", $crate::util::like_escape(q));
                let rows = sqlx::query(concat!(
                    "SELECT ",
                    $crate::ops::workstreams::workstream_columns!(),
                    " FROM workstreams WHERE ws_id LIKE $1 ESCAPE '\\' AND state <> 'creating' ORDER BY ws_id LIMIT 50"
                ))
                .bind(&pattern)
                .fetch_all(&self.pool)
                .await?;
                match rows.len() {
                    0 => Err($crate::error::StorageError::NotFound(q.to_string())),
                    1 => Self::ws_from_row(&rows[0]),
                    n => Err($crate::error::StorageError::Ambiguous {
                        query: q.to_string(),
                        count: n,
                    }),
                }
            }

            async fn set_workstream_state(
                &self,
                ws_id: &str,
                state: $crate::types::WorkstreamState,
            ) -> $crate::error::Result<()> {
                if state == $crate::types::WorkstreamState::Creating {
                    return Err($crate::error::StorageError::InvalidInput(
                        "a published workstream cannot return to creating".into(),
                    ));
                }
                let n = sqlx::query(
                    "UPDATE workstreams SET state = $2, updated = $3 WHERE ws_id = $1 AND state <> 'creating'",
                )
                .bind(ws_id)
                .bind(state.as_str())
                .bind($crate::util::now())
                .execute(&self.pool)
                .await?
                .rows_affected();
                if n == 0 {
                    return Err($crate::error::StorageError::UnknownWorkstream(ws_id.to_string()));
                }
                Ok(())
            }

            async fn set_alias(&self, ws_id: &str, alias: Option<&str>) -> $crate::error::Result<()> {
                if let Some(a) = alias {
                    $crate::ops::workstreams::validate_alias(a)?;
                }
                let n = sqlx::query("UPDATE workstreams SET alias = $2, updated = $3 WHERE ws_id = $1")
                    .bind(ws_id)
                    .bind(alias)
                    .bind($crate::util::now())
                    .execute(&self.pool)
                    .await
                    .map_err(|e| $crate::error::classify(e, alias.unwrap_or_default()))?
                    .rows_affected();
                if n == 0 {
                    return Err($crate::error::StorageError::UnknownWorkstream(ws_id.to_string()));
                }
                Ok(())
            }

            async fn set_title(&self, ws_id: &str, title: Option<&str>) -> $crate::error::Result<()> {
                if title.is_some_and(|t| t.len() > 1024 || t.contains('\0')) {
                    return Err($crate::error::StorageError::InvalidInput(
                        "title is longer than 1024 bytes or contains NUL".into(),
                    ));
                }
                let n = sqlx::query("UPDATE workstreams SET title = $2, updated = $3 WHERE ws_id = $1")
                    .bind(ws_id)
                    .bind(title)
                    .bind($crate::util::now())
                    .execute(&self.pool)
                    .await?
                    .rows_affected();
                if n == 0 {
                    return Err($crate::error::StorageError::UnknownWorkstream(ws_id.to_string()));
                }
                Ok(())
            }

            async fn set_title_if_unnamed(&self, ws_id: &str, title: &str) -> $crate::error::Result<bool> {
                if title.len() > 1024 || title.contains('\0') {
                    return Err($crate::error::StorageError::InvalidInput(
                        "title is longer than 1024 bytes or contains NUL".into(),
                    ));
                }
                let n = sqlx::query(
                    "UPDATE workstreams SET title = $2, updated = $3 \
                     WHERE ws_id = $1 AND title IS NULL AND alias IS NULL",
                )
                .bind(ws_id)
                .bind(title)
                .bind($crate::util::now())
                .execute(&self.pool)
                .await?
                .rows_affected();
                Ok(n == 1)
            }

            async fn list_workstreams_with_history(
                &self,
                user_id: Option<&str>,
                limit: i64,
                offset: i64,
            ) -> $crate::error::Result<Vec<$crate::types::WorkstreamSummary>> {
                use sqlx::Row;
                let rows = sqlx::query(concat!(
                    "SELECT ",
                    $crate::ops::workstreams::workstream_columns!(),
                    ", n, last_activity FROM workstreams w JOIN \
                     (SELECT ws_id AS cws, COUNT(*) AS n, MAX(timestamp) AS last_activity, MAX(id) AS last_id \
                     FROM conversations GROUP BY ws_id) c \
                     ON c.cws = w.ws_id WHERE w.state <> 'creating' AND w.kind <> 'task_agent' \
                     AND ($1 IS NULL OR w.user_id = $1) \
                     ORDER BY last_id DESC LIMIT $2 OFFSET $3"
                ))
                .bind(user_id)
                .bind(limit.clamp(0, 10_000))
                .bind(offset.max(0))
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|r| {
                        Ok($crate::types::WorkstreamSummary {
                            workstream: Self::ws_from_row(r)?,
                            message_count: r.try_get("n")?,
                            last_activity: r.try_get("last_activity")?,
                        })
                    })
                    .collect()
            }

            async fn delete_workstream(&self, ws_id: &str) -> $crate::error::Result<bool> {
                let n = sqlx::query("DELETE FROM workstreams WHERE ws_id = $1")
                    .bind(ws_id)
                    .execute(&self.pool)
                    .await?
                    .rows_affected();
                Ok(n == 1)
            }

            async fn fork_workstream(
                &self,
                source: &str,
                dest: &$crate::types::Reservation,
            ) -> $crate::error::Result<usize> {
                use $crate::error::StorageError;
                let mut tx = self.begin_write().await?;
                let dest_row: Option<(String, Option<String>)> = sqlx::query_as(
                    "SELECT state, incarnation FROM workstreams WHERE ws_id = $1",
                )
                .bind(&dest.ws_id)
                .fetch_optional(&mut *tx)
                .await?;
                match dest_row {
                    None => return Err(StorageError::UnknownWorkstream(dest.ws_id.clone())),
                    Some((state, token))
                        if state != "creating" || token.as_deref() != Some(dest.token.as_str()) =>
                    {
                        return Err(StorageError::TokenMismatch(dest.ws_id.clone()));
                    }
                    Some(_) => {}
                }
                let existing: i64 =
                    sqlx::query_scalar("SELECT COUNT(*) FROM conversations WHERE ws_id = $1")
                        .bind(&dest.ws_id)
                        .fetch_one(&mut *tx)
                        .await?;
                if existing != 0 {
                    return Err(StorageError::InvalidInput(format!(
                        "fork destination {} already has history",
                        dest.ws_id
                    )));
                }
                if !Self::published_exists(&mut *tx, source).await? {
                    return Err(StorageError::UnknownWorkstream(source.to_string()));
                }
                let (rows, cp) = Self::resume_rows(&mut *tx, source).await?;
                let turns: Vec<$crate::types::NewTurn> = rows
                    .iter()
                    .map(|t| $crate::types::NewTurn {
                        // An event id is a cursor into the source's event stream;
                        // it means nothing in the fork.
                        event_id: None,
                        ..t.turn.clone()
                    })
                    .collect();
                let ids = Self::insert_turns(&mut *tx, &dest.ws_id, &turns).await?;
                sqlx::query(
                    "INSERT INTO workstream_config (ws_id, key, value) SELECT $1, key, value FROM workstream_config \
                     WHERE ws_id = $2 AND key NOT LIKE '\\_turnstone.%' ESCAPE '\\'",
                )
                .bind(&dest.ws_id)
                .bind(source)
                .execute(&mut *tx)
                .await?;
                if let Some(cp) = cp {
                    // The summary turns lead the copied view; map them to their new ids.
                    let n = cp.summary_ids.len();
                    let new_cp = $crate::types::Checkpoint {
                        summary_ids: ids[..n].to_vec(),
                        watermark: ids[n - 1],
                    };
                    let value = serde_json::to_string(&new_cp)
                        .map_err(|e| StorageError::InvalidInput(e.to_string()))?;
                    sqlx::query("INSERT INTO workstream_config (ws_id, key, value) VALUES ($1, $2, $3)")
                        .bind(&dest.ws_id)
                        .bind($crate::ops::turns::CHECKPOINT_KEY)
                        .bind(value)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(ids.len())
            }

            async fn prune_workstreams(
                &self,
                retention: Option<std::time::Duration>,
                empty_grace: std::time::Duration,
            ) -> $crate::error::Result<Vec<String>> {
                let mut removed: Vec<String> = sqlx::query_scalar(
                    "DELETE FROM workstreams WHERE state <> 'creating' AND alias IS NULL AND updated < $1 \
                     AND NOT EXISTS (SELECT 1 FROM conversations c WHERE c.ws_id = workstreams.ws_id) RETURNING ws_id",
                )
                .bind($crate::util::ago(empty_grace))
                .fetch_all(&self.pool)
                .await?;
                if let Some(r) = retention {
                    let old: Vec<String> = sqlx::query_scalar(
                        "DELETE FROM workstreams WHERE state <> 'creating' AND alias IS NULL AND \
                         COALESCE((SELECT MAX(c.timestamp) FROM conversations c WHERE c.ws_id = workstreams.ws_id), updated) < $1 \
                         RETURNING ws_id",
                    )
                    .bind($crate::util::ago(r))
                    .fetch_all(&self.pool)
                    .await?;
                    removed.extend(old);
                }
                removed.sort();
                Ok(removed)
            }

            async fn reap_abandoned_creates(
                &self,
                older_than: std::time::Duration,
                exclude: &[String],
            ) -> $crate::error::Result<Vec<String>> {
                let cutoff = $crate::util::ago(older_than);
                let candidates: Vec<String> = sqlx::query_scalar(
                    "SELECT ws_id FROM workstreams WHERE state = 'creating' AND updated < $1 ORDER BY ws_id",
                )
                .bind(&cutoff)
                .fetch_all(&self.pool)
                .await?;
                let mut reaped = Vec::new();
                for ws_id in candidates.into_iter().filter(|id| !exclude.contains(id)) {
                    // Recheck state and age in the delete itself.
                    let n = sqlx::query(
                        "DELETE FROM workstreams WHERE ws_id = $1 AND state = 'creating' AND updated < $2",
                    )
                    .bind(&ws_id)
                    .bind(&cutoff)
                    .execute(&self.pool)
                    .await?
                    .rows_affected();
                    if n == 1 {
                        reaped.push(ws_id);
                    }
                }
                Ok(reaped)
            }

            async fn set_config(
                &self,
                ws_id: &str,
                key: &str,
                value: Option<&str>,
            ) -> $crate::error::Result<()> {
                if key.is_empty() || key.len() > 256 || key.starts_with($crate::ops::workstreams::RESERVED_PREFIX) {
                    return Err($crate::error::StorageError::InvalidInput(format!(
                        "config key {key:?} is empty, too long or reserved"
                    )));
                }
                match value {
                    Some(v) => {
                        sqlx::query(
                            "INSERT INTO workstream_config (ws_id, key, value) VALUES ($1, $2, $3) \
                             ON CONFLICT (ws_id, key) DO UPDATE SET value = excluded.value",
                        )
                        .bind(ws_id)
                        .bind(key)
                        .bind(v)
                        .execute(&self.pool)
                        .await
                        .map_err(|e| $crate::error::classify(e, ws_id))?;
                    }
                    None => {
                        sqlx::query("DELETE FROM workstream_config WHERE ws_id = $1 AND key = $2")
                            .bind(ws_id)
                            .bind(key)
                            .execute(&self.pool)
                            .await?;
                    }
                }
                Ok(())
            }

            async fn get_config(&self, ws_id: &str, key: &str) -> $crate::error::Result<Option<String>> {
                if key.starts_with($crate::ops::workstreams::RESERVED_PREFIX) {
                    return Ok(None);
                }
                Ok(sqlx::query_scalar::<_, Option<String>>(
                    "SELECT value FROM workstream_config WHERE ws_id = $1 AND key = $2",
                )
                .bind(ws_id)
                .bind(key)
                .fetch_optional(&self.pool)
                .await?
                .flatten())
            }

            async fn list_config(
                &self,
                ws_id: &str,
            ) -> $crate::error::Result<Vec<(String, Option<String>)>> {
                Ok(sqlx::query_as(
                    "SELECT key, value FROM workstream_config WHERE ws_id = $1 \
                     AND key NOT LIKE '\\_turnstone.%' ESCAPE '\\' ORDER BY key",
                )
                .bind(ws_id)
                .fetch_all(&self.pool)
                .await?)
            }
        }
    };
}

pub(crate) use impl_workstream_store;
