//! Turn operations (append, load, checkpoints, search), written once and
//! expanded for each backend. Uses the row helpers from `impl_ws_and_turns!` and
//! the backend's `search_impl`.

/// Expands `TurnStore` for a backend.
macro_rules! impl_turns {
    ($store:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::backend::TurnStore for $store {
            async fn save_turn(
                &self,
                ws_id: &str,
                turn: &$crate::types::NewTurn,
            ) -> $crate::error::Result<i64> {
                turn.validate()?;
                let mut conn = self.pool.acquire().await?;
                let ids = Self::insert_turns(&mut conn, ws_id, std::slice::from_ref(turn)).await?;
                ids.first().copied().ok_or_else(|| {
                    $crate::error::StorageError::UnknownWorkstream(ws_id.to_string())
                })
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
                    LoadMode::Transcript => Ok($crate::ops_ws::resume_view(
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
                .bind($crate::ops_ws::CHECKPOINT_KEY)
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
                        .bind($crate::ops_ws::CHECKPOINT_KEY)
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

pub(crate) use impl_turns;
