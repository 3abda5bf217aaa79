//! `WatchStore`: durable watches. A node's scheduler claims due watches for
//! a lease (the claim repeats its conditions on the row it updates, and on
//! PostgreSQL skips rows another node is claiming, so two nodes never hold
//! one watch); a poll is recorded only by the node holding the claim, which
//! it releases; an ended watch keeps its result until it was delivered.

/// Columns of `watches`.
macro_rules! watch_columns {
    () => {
        "watch_id, ws_id, name, command, interval_secs, condition, max_polls, poll_count, \
         last_output, last_exit_code, last_error, state, next_poll, plugin, claimed_by, result, \
         delivered, created, updated"
    };
}

pub(crate) use watch_columns;

/// Expands `WatchStore` for a backend; `$lock` is what the claim's inner
/// select adds to lock the rows it picks (`FOR UPDATE SKIP LOCKED` on
/// PostgreSQL; nothing on SQLite, whose writers are serialized).
macro_rules! impl_watch_store {
    ($store:ty, $db:ty, $lock:literal) => {
        impl $store {
            fn watch_from_row(
                r: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::types::Watch> {
                use sqlx::Row;
                Ok($crate::types::Watch {
                    watch_id: r.try_get("watch_id")?,
                    ws_id: r.try_get("ws_id")?,
                    name: r.try_get("name")?,
                    command: r.try_get("command")?,
                    interval_secs: r.try_get("interval_secs")?,
                    condition: r.try_get("condition")?,
                    max_polls: r.try_get::<Option<i64>, _>("max_polls")?.unwrap_or(0),
                    poll_count: r.try_get("poll_count")?,
                    last_output: r.try_get("last_output")?,
                    last_exit_code: r.try_get("last_exit_code")?,
                    last_error: r.try_get("last_error")?,
                    state: r.try_get("state")?,
                    next_poll: r.try_get("next_poll")?,
                    plugin: r.try_get("plugin")?,
                    claimed_by: r.try_get("claimed_by")?,
                    result: r.try_get("result")?,
                    delivered: r.try_get("delivered")?,
                    created: r.try_get("created")?,
                    updated: r.try_get("updated")?,
                })
            }

            fn push_ws_filter(
                qb: &mut sqlx::QueryBuilder<$db>,
                ws_ids: Option<&[String]>,
            ) -> bool {
                let Some(ids) = ws_ids else { return true };
                if ids.is_empty() {
                    return false;
                }
                qb.push(" AND ws_id IN (");
                let mut sep = qb.separated(", ");
                for id in ids {
                    sep.push_bind(id.clone());
                }
                qb.push(")");
                true
            }
        }

        #[async_trait::async_trait]
        impl $crate::backend::WatchStore for $store {
            async fn create_watch(
                &self,
                w: &$crate::types::NewWatch,
                max_active: i64,
            ) -> $crate::error::Result<$crate::types::Watch> {
                use $crate::error::StorageError;
                let mut tx = self.begin_write().await?;
                let active: i64 = sqlx::query_scalar(
                    "SELECT CAST(COUNT(*) AS BIGINT) FROM watches WHERE ws_id = $1 AND state = 'active'",
                )
                .bind(&w.ws_id)
                .fetch_one(&mut *tx)
                .await?;
                if active >= max_active {
                    return Err(StorageError::InvalidInput(format!(
                        "this workstream already has {active} active watches (at most {max_active}); cancel one first"
                    )));
                }
                let taken: i64 = sqlx::query_scalar(
                    "SELECT CAST(COUNT(*) AS BIGINT) FROM watches WHERE ws_id = $1 AND state = 'active' AND name = $2",
                )
                .bind(&w.ws_id)
                .bind(&w.name)
                .fetch_one(&mut *tx)
                .await?;
                if taken > 0 {
                    return Err(StorageError::InvalidInput(format!(
                        "an active watch named {:?} exists in this workstream",
                        w.name
                    )));
                }
                let now = $crate::util::now();
                let row = sqlx::query(concat!(
                    "INSERT INTO watches (watch_id, ws_id, name, command, interval_secs, condition, max_polls, \
                     poll_count, state, next_poll, plugin, created, updated) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, 0, 'active', $8, $9, $8, $8) RETURNING ",
                    $crate::ops::watches::watch_columns!()
                ))
                .bind($crate::util::random_hex(16))
                .bind(&w.ws_id)
                .bind(&w.name)
                .bind(&w.command)
                .bind(w.interval_secs)
                .bind(&w.condition)
                .bind(w.max_polls)
                .bind(&now)
                .bind(&w.plugin)
                .fetch_one(&mut *tx)
                .await
                .map_err(|e| $crate::error::classify(e, &w.ws_id))?;
                let watch = Self::watch_from_row(&row)?;
                tx.commit().await?;
                Ok(watch)
            }

            async fn list_watches(
                &self,
                ws_id: &str,
                active_only: bool,
            ) -> $crate::error::Result<Vec<$crate::types::Watch>> {
                let rows = sqlx::query(concat!(
                    "SELECT ",
                    $crate::ops::watches::watch_columns!(),
                    " FROM watches WHERE ws_id = $1 AND ($2 = 0 OR state = 'active') ORDER BY created, watch_id"
                ))
                .bind(ws_id)
                .bind(i64::from(active_only))
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::watch_from_row).collect()
            }

            async fn get_watch(
                &self,
                watch_id: &str,
            ) -> $crate::error::Result<Option<$crate::types::Watch>> {
                let row = sqlx::query(concat!(
                    "SELECT ",
                    $crate::ops::watches::watch_columns!(),
                    " FROM watches WHERE watch_id = $1"
                ))
                .bind(watch_id)
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(Self::watch_from_row).transpose()
            }

            async fn cancel_watch(
                &self,
                ws_id: &str,
                name_or_id: &str,
            ) -> $crate::error::Result<Option<$crate::types::Watch>> {
                let active = self.list_watches(ws_id, true).await?;
                let target = match active.iter().find(|w| w.name == name_or_id) {
                    Some(w) => Some(w),
                    None => {
                        let by_id: Vec<&$crate::types::Watch> = active
                            .iter()
                            .filter(|w| !name_or_id.is_empty() && w.watch_id.starts_with(name_or_id))
                            .collect();
                        if by_id.len() > 1 {
                            return Err($crate::error::StorageError::InvalidInput(format!(
                                "{name_or_id:?} matches {} watches; give more of the id or the name",
                                by_id.len()
                            )));
                        }
                        by_id.first().copied()
                    }
                };
                let Some(target) = target else { return Ok(None) };
                let now = $crate::util::now();
                // Nothing to deliver: the cancel was the caller's own doing.
                let row = sqlx::query(concat!(
                    "UPDATE watches SET state = 'cancelled', next_poll = NULL, claimed_by = NULL, \
                     claimed_until = NULL, delivered = $2, updated = $2 \
                     WHERE watch_id = $1 AND state = 'active' RETURNING ",
                    $crate::ops::watches::watch_columns!()
                ))
                .bind(&target.watch_id)
                .bind(&now)
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(Self::watch_from_row).transpose()
            }

            async fn claim_due_watches(
                &self,
                node: &str,
                now: &str,
                until: &str,
                limit: i64,
                ws_ids: Option<&[String]>,
            ) -> $crate::error::Result<Vec<$crate::types::Watch>> {
                let mut qb = sqlx::QueryBuilder::<$db>::new(
                    "UPDATE watches SET claimed_by = ",
                );
                qb.push_bind(node.to_string())
                    .push(", claimed_until = ")
                    .push_bind(until.to_string())
                    // Repeated on the row being updated: a row another node
                    // claimed meanwhile no longer qualifies.
                    .push(" WHERE state = 'active' AND (claimed_until IS NULL OR claimed_until < ")
                    .push_bind(now.to_string())
                    .push(") AND watch_id IN (SELECT watch_id FROM watches WHERE state = 'active' AND next_poll <= ")
                    .push_bind(now.to_string())
                    .push(" AND (claimed_until IS NULL OR claimed_until < ")
                    .push_bind(now.to_string())
                    .push(")");
                if !Self::push_ws_filter(&mut qb, ws_ids) {
                    return Ok(Vec::new());
                }
                qb.push(" ORDER BY next_poll LIMIT ")
                    .push_bind(limit.clamp(1, 10_000))
                    .push(concat!($lock, ") RETURNING ", $crate::ops::watches::watch_columns!()));
                let rows = qb.build().fetch_all(&self.pool).await?;
                rows.iter().map(Self::watch_from_row).collect()
            }

            async fn record_poll(
                &self,
                watch_id: &str,
                node: &str,
                poll: &$crate::types::PollRecord,
            ) -> $crate::error::Result<bool> {
                let n = sqlx::query(
                    "UPDATE watches SET poll_count = poll_count + 1, last_output = $3, last_exit_code = $4, \
                     last_error = $5, state = $6, next_poll = $7, result = $8, claimed_by = NULL, \
                     claimed_until = NULL, updated = $9 \
                     WHERE watch_id = $1 AND claimed_by = $2 AND state = 'active'",
                )
                .bind(watch_id)
                .bind(node)
                .bind(&poll.output)
                .bind(poll.exit_code)
                .bind(&poll.error)
                .bind(&poll.state)
                .bind(&poll.next_poll)
                .bind(&poll.result)
                .bind($crate::util::now())
                .execute(&self.pool)
                .await?
                .rows_affected();
                Ok(n == 1)
            }

            async fn undelivered_watches(
                &self,
                ws_ids: Option<&[String]>,
            ) -> $crate::error::Result<Vec<$crate::types::Watch>> {
                let mut qb = sqlx::QueryBuilder::<$db>::new(concat!(
                    "SELECT ",
                    $crate::ops::watches::watch_columns!(),
                    " FROM watches WHERE state IN ('fired', 'expired') AND delivered IS NULL"
                ));
                if !Self::push_ws_filter(&mut qb, ws_ids) {
                    return Ok(Vec::new());
                }
                qb.push(" ORDER BY updated, watch_id LIMIT 1000");
                let rows = qb.build().fetch_all(&self.pool).await?;
                rows.iter().map(Self::watch_from_row).collect()
            }

            async fn mark_watch_delivered(&self, watch_id: &str) -> $crate::error::Result<bool> {
                let n = sqlx::query(
                    "UPDATE watches SET delivered = $2 WHERE watch_id = $1 AND delivered IS NULL",
                )
                .bind(watch_id)
                .bind($crate::util::now())
                .execute(&self.pool)
                .await?
                .rows_affected();
                Ok(n == 1)
            }

            async fn unmark_watch_delivered(&self, watch_id: &str) -> $crate::error::Result<()> {
                sqlx::query("UPDATE watches SET delivered = NULL WHERE watch_id = $1")
                    .bind(watch_id)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn next_watch_due(
                &self,
                ws_ids: Option<&[String]>,
            ) -> $crate::error::Result<Option<String>> {
                use sqlx::Row;
                let mut qb = sqlx::QueryBuilder::<$db>::new(
                    "SELECT MIN(next_poll) AS due FROM watches WHERE state = 'active'",
                );
                if !Self::push_ws_filter(&mut qb, ws_ids) {
                    return Ok(None);
                }
                let row = qb.build().fetch_one(&self.pool).await?;
                Ok(row.try_get("due")?)
            }
        }
    };
}

pub(crate) use impl_watch_store;
