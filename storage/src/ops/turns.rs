//! `TurnStore`: the append-only conversation log (append, load, compaction
//! checkpoints, truncate, full-text search), plus the turn row helpers that
//! forking a workstream reuses. Written once and expanded for each backend (see
//! the `ops` module docs); full-text search calls the backend's own
//! `search_impl`, the one query whose SQL differs between the two.

/// Columns of `conversations`, in `StoredTurn` order.
macro_rules! turn_columns {
    () => {
        "id, ws_id, timestamp, role, content, tool_name, tool_call_id, tool_calls, provider_data, source, event_id, is_error, attachments, meta"
    };
}

pub(crate) use turn_columns;

/// Config key holding the compaction checkpoint (reserved prefix, so callers of
/// `set_config` cannot overwrite it).
pub(crate) const CHECKPOINT_KEY: &str = "_turnstone.compaction_checkpoint";

/// Builds the resume view from all rows of a workstream and its checkpoint.
pub(crate) fn resume_view(
    rows: Vec<crate::types::StoredTurn>,
    checkpoint: Option<&crate::types::Checkpoint>,
) -> Vec<crate::types::StoredTurn> {
    use crate::types::COMPACTION_SOURCE;
    let is_summary =
        |t: &crate::types::StoredTurn| t.turn.source.as_deref() == Some(COMPACTION_SOURCE);
    match checkpoint {
        None => rows.into_iter().filter(|t| !is_summary(t)).collect(),
        Some(cp) => {
            let mut summary: Vec<_> = Vec::with_capacity(cp.summary_ids.len());
            let mut tail = Vec::new();
            for t in rows {
                if cp.summary_ids.contains(&t.id) {
                    summary.push(t);
                } else if t.id > cp.watermark && !is_summary(&t) {
                    tail.push(t);
                }
            }
            summary.extend(tail);
            summary
        }
    }
}

/// Parses and validates a stored checkpoint against the workstream's rows.
pub(crate) fn valid_checkpoint(
    raw: Option<&str>,
    rows: &[crate::types::StoredTurn],
) -> Option<crate::types::Checkpoint> {
    let cp: crate::types::Checkpoint = serde_json::from_str(raw?).ok()?;
    if cp.summary_ids.is_empty() {
        return None;
    }
    let summary_ok = cp.summary_ids.iter().all(|id| {
        rows.iter().any(|t| {
            t.id == *id && t.turn.source.as_deref() == Some(crate::types::COMPACTION_SOURCE)
        })
    });
    let watermark_ok = cp.watermark == 0 || rows.iter().any(|t| t.id == cp.watermark);
    (summary_ok && watermark_ok).then_some(cp)
}

/// Expands `TurnStore`, and the turn row helpers `impl_workstream_store!` uses,
/// for a backend whose store type has a `pool` field and the methods
/// `begin_write` and `search_impl`.
macro_rules! impl_turn_store {
    ($store:ty, $db:ty) => {
        impl $store {
            fn turn_from_row(
                r: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::types::StoredTurn> {
                use sqlx::Row;
                Ok($crate::types::StoredTurn {
                    id: r.try_get("id")?,
                    ws_id: r.try_get("ws_id")?,
                    timestamp: r.try_get("timestamp")?,
                    turn: $crate::types::NewTurn {
                        role: $crate::types::Role::parse(r.try_get::<&str, _>("role")?)?,
                        content: r.try_get("content")?,
                        tool_name: r.try_get("tool_name")?,
                        tool_call_id: r.try_get("tool_call_id")?,
                        tool_calls: r.try_get("tool_calls")?,
                        provider_data: r.try_get("provider_data")?,
                        source: r.try_get("source")?,
                        event_id: r.try_get("event_id")?,
                        is_error: r.try_get("is_error")?,
                        attachments: r.try_get("attachments")?,
                        meta: r.try_get("meta")?,
                    },
                })
            }

            async fn all_rows(
                conn: &mut <$db as sqlx::Database>::Connection,
                ws_id: &str,
            ) -> $crate::error::Result<Vec<$crate::types::StoredTurn>> {
                let rows = sqlx::query(concat!(
                    "SELECT ",
                    $crate::ops::turns::turn_columns!(),
                    " FROM conversations WHERE ws_id = $1 ORDER BY id"
                ))
                .bind(ws_id)
                .fetch_all(&mut *conn)
                .await?;
                rows.iter().map(Self::turn_from_row).collect()
            }

            async fn checkpoint_raw(
                conn: &mut <$db as sqlx::Database>::Connection,
                ws_id: &str,
            ) -> $crate::error::Result<Option<String>> {
                Ok(sqlx::query_scalar::<_, Option<String>>(
                    "SELECT value FROM workstream_config WHERE ws_id = $1 AND key = $2",
                )
                .bind(ws_id)
                .bind($crate::ops::turns::CHECKPOINT_KEY)
                .fetch_optional(&mut *conn)
                .await?
                .flatten())
            }

            /// The resume view and the checkpoint it used.
            async fn resume_rows(
                conn: &mut <$db as sqlx::Database>::Connection,
                ws_id: &str,
            ) -> $crate::error::Result<(
                Vec<$crate::types::StoredTurn>,
                Option<$crate::types::Checkpoint>,
            )> {
                let rows = Self::all_rows(conn, ws_id).await?;
                let raw = Self::checkpoint_raw(conn, ws_id).await?;
                let cp = $crate::ops::turns::valid_checkpoint(raw.as_deref(), &rows);
                if raw.is_some() && cp.is_none() {
                    tracing::warn!(ws_id, "compaction checkpoint is invalid; resuming from the full transcript");
                }
                Ok(($crate::ops::turns::resume_view(rows, cp.as_ref()), cp))
            }

            /// Inserts turns of one workstream in order; returns their ids in order.
            pub(crate) async fn insert_turns(
                conn: &mut <$db as sqlx::Database>::Connection,
                ws_id: &str,
                turns: &[$crate::types::NewTurn],
            ) -> $crate::error::Result<Vec<i64>> {
                let rows: Vec<(&str, &$crate::types::NewTurn)> =
                    turns.iter().map(|t| (ws_id, t)).collect();
                Self::insert_rows(conn, &rows)
                    .await
                    .map_err(|e| $crate::error::classify(e, ws_id))
            }

            /// Inserts `(workstream, turn)` rows in order (chunked multi-row
            /// INSERTs); returns their ids in order.
            pub(crate) async fn insert_rows(
                conn: &mut <$db as sqlx::Database>::Connection,
                rows: &[(&str, &$crate::types::NewTurn)],
            ) -> std::result::Result<Vec<i64>, sqlx::Error> {
                let now = $crate::util::now();
                let mut ids = Vec::with_capacity(rows.len());
                for chunk in rows.chunks(500) {
                    let mut qb = sqlx::QueryBuilder::<$db>::new(
                        "INSERT INTO conversations (ws_id, timestamp, role, content, tool_name, tool_call_id, tool_calls, provider_data, source, event_id, is_error, attachments, meta) ",
                    );
                    qb.push_values(chunk, |mut b, (ws_id, t)| {
                        b.push_bind(ws_id.to_string())
                            .push_bind(now.clone())
                            .push_bind(t.role.as_str())
                            .push_bind(t.content.clone())
                            .push_bind(t.tool_name.clone())
                            .push_bind(t.tool_call_id.clone())
                            .push_bind(t.tool_calls.clone())
                            .push_bind(t.provider_data.clone())
                            .push_bind(t.source.clone())
                            .push_bind(t.event_id)
                            .push_bind(t.is_error)
                            .push_bind(t.attachments.clone())
                            .push_bind(t.meta.clone());
                    });
                    qb.push(" RETURNING id");
                    // A statement of many rows is not kept in the
                    // connection's statement cache: each row count is a
                    // statement of its own, and a group's (hundreds of
                    // bound values, the FTS trigger for each row) is large.
                    let mut chunk_ids: Vec<i64> = qb
                        .build_query_scalar()
                        .persistent(chunk.len() == 1)
                        .fetch_all(&mut *conn)
                        .await?;
                    // Ids grow in insertion order within one statement.
                    chunk_ids.sort_unstable();
                    ids.extend(chunk_ids);
                }
                Ok(ids)
            }

            /// Inserts one turn inside `conn`'s transaction; returns its id.
            pub(crate) async fn insert_one(
                conn: &mut <$db as sqlx::Database>::Connection,
                ws_id: &str,
                turn: &$crate::types::NewTurn,
            ) -> $crate::error::Result<i64> {
                let ids = Self::insert_turns(conn, ws_id, std::slice::from_ref(turn)).await?;
                ids.first().copied().ok_or_else(|| {
                    $crate::error::StorageError::UnknownWorkstream(ws_id.to_string())
                })
            }
        }

        #[async_trait::async_trait]
        impl $crate::backend::TurnStore for $store {
            async fn save_turn(
                &self,
                ws_id: &str,
                turn: &$crate::types::NewTurn,
            ) -> $crate::error::Result<i64> {
                turn.validate()?;
                // Each backend's `save_one`: SQLite commits concurrent saves
                // together (`group_commit`), PostgreSQL one by one.
                self.save_one(ws_id, turn).await
            }

            async fn save_turns(
                &self,
                ws_id: &str,
                turns: &[$crate::types::NewTurn],
            ) -> $crate::error::Result<Vec<i64>> {
                for t in turns {
                    t.validate()?;
                }
                let mut tx = self.begin_write().await?;
                let ids = Self::insert_turns(&mut *tx, ws_id, turns).await?;
                tx.commit().await?;
                Ok(ids)
            }

            async fn load_turns(
                &self,
                ws_id: &str,
                mode: $crate::types::LoadMode,
            ) -> $crate::error::Result<Vec<$crate::types::StoredTurn>> {
                use $crate::types::LoadMode;
                let mut conn = self.pool.acquire().await?;
                match mode {
                    LoadMode::Everything => Self::all_rows(&mut conn, ws_id).await,
                    LoadMode::Transcript => Ok($crate::ops::turns::resume_view(
                        Self::all_rows(&mut conn, ws_id).await?,
                        None,
                    )),
                    LoadMode::Resume => Ok(Self::resume_rows(&mut conn, ws_id).await?.0),
                }
            }

            async fn count_turns(&self, ws_id: &str) -> $crate::error::Result<i64> {
                Ok(
                    sqlx::query_scalar("SELECT COUNT(*) FROM conversations WHERE ws_id = $1")
                        .bind(ws_id)
                        .fetch_one(&self.pool)
                        .await?,
                )
            }

            async fn save_compaction(
                &self,
                ws_id: &str,
                watermark: i64,
                summary: &[$crate::types::NewTurn],
            ) -> $crate::error::Result<$crate::types::Checkpoint> {
                use $crate::error::StorageError;
                if summary.is_empty() {
                    return Err(StorageError::InvalidInput(
                        "a compaction needs summary turns".into(),
                    ));
                }
                let mut turns = summary.to_vec();
                for t in &mut turns {
                    t.source = Some($crate::types::COMPACTION_SOURCE.to_string());
                    t.validate()?;
                }
                let mut tx = self.begin_write().await?;
                if watermark != 0 {
                    let found: Option<i64> = sqlx::query_scalar(
                        "SELECT id FROM conversations WHERE ws_id = $1 AND id = $2",
                    )
                    .bind(ws_id)
                    .bind(watermark)
                    .fetch_optional(&mut *tx)
                    .await?;
                    if found.is_none() {
                        return Err(StorageError::InvalidInput(format!(
                            "watermark {watermark} is not a turn of workstream {ws_id}"
                        )));
                    }
                }
                let ids = Self::insert_turns(&mut *tx, ws_id, &turns).await?;
                let cp = $crate::types::Checkpoint {
                    summary_ids: ids,
                    watermark,
                };
                let value = serde_json::to_string(&cp)
                    .map_err(|e| StorageError::InvalidInput(e.to_string()))?;
                sqlx::query(
                    "INSERT INTO workstream_config (ws_id, key, value) VALUES ($1, $2, $3) \
                     ON CONFLICT (ws_id, key) DO UPDATE SET value = excluded.value",
                )
                .bind(ws_id)
                .bind($crate::ops::turns::CHECKPOINT_KEY)
                .bind(value)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(cp)
            }

            async fn truncate_turns(
                &self,
                ws_id: &str,
                keep_through: i64,
            ) -> $crate::error::Result<u64> {
                let mut tx = self.begin_write().await?;
                let raw = Self::checkpoint_raw(&mut *tx, ws_id).await?;
                let stale = raw.as_deref().is_some_and(|r| {
                    match serde_json::from_str::<$crate::types::Checkpoint>(r) {
                        Ok(cp) => {
                            cp.watermark > keep_through
                                || cp.summary_ids.iter().any(|&id| id > keep_through)
                        }
                        Err(_) => false,
                    }
                });
                if stale {
                    sqlx::query("DELETE FROM workstream_config WHERE ws_id = $1 AND key = $2")
                        .bind(ws_id)
                        .bind($crate::ops::turns::CHECKPOINT_KEY)
                        .execute(&mut *tx)
                        .await?;
                }
                let done = sqlx::query("DELETE FROM conversations WHERE ws_id = $1 AND id > $2")
                    .bind(ws_id)
                    .bind(keep_through)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(done.rows_affected())
            }

            async fn checkpoint(
                &self,
                ws_id: &str,
            ) -> $crate::error::Result<Option<$crate::types::Checkpoint>> {
                let mut conn = self.pool.acquire().await?;
                Ok(Self::resume_rows(&mut conn, ws_id).await?.1)
            }

            async fn search_history(
                &self,
                query: &str,
                filter: &$crate::types::SearchFilter,
            ) -> $crate::error::Result<Vec<$crate::types::SearchHit>> {
                let tokens = $crate::util::search_tokens(query);
                if tokens.is_empty() {
                    return Ok(Vec::new());
                }
                let limit = filter.limit.unwrap_or(20).clamp(1, 1000);
                let rows = self.search_impl(&tokens, filter, limit).await?;
                rows.iter()
                    .map(|r| {
                        use sqlx::Row;
                        Ok($crate::types::SearchHit {
                            turn_id: r.try_get("id")?,
                            ws_id: r.try_get("ws_id")?,
                            ws_name: r.try_get("ws_name")?,
                            tool_name: r.try_get("tool_name")?,
                            role: $crate::types::Role::parse(r.try_get::<&str, _>("role")?)?,
                            message: r
                                .try_get::<Option<String>, _>("content")?
                                .unwrap_or_default(),
                            timestamp: r.try_get("timestamp")?,
                        })
                    })
                    .collect()
            }
        }
    };
}

pub(crate) use impl_turn_store;
