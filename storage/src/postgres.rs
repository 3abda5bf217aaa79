//! The PostgreSQL backend: pooled connections, tsvector full-text search.

use crate::error::Result;
use crate::migrate::check_and_run;
use crate::ops::attachments::impl_attachment_store;
use crate::ops::channels::impl_channel_store;
use crate::ops::identity::impl_identity_store;
use crate::ops::memories::impl_memory_store;
use crate::ops::notify::impl_notify_store;
use crate::ops::operations::impl_ops_store;
use crate::ops::plugins::impl_plugin_store;
use crate::ops::policies::impl_policy_store;
use crate::ops::previews::impl_preview_store;
use crate::ops::skills::impl_skill_store;
use crate::ops::turns::impl_turn_store;
use crate::ops::watches::impl_watch_store;
use crate::ops::workstreams::impl_workstream_store;
use crate::types::SearchFilter;
use crate::write_gate::{WriteConn, WriteTx};
use sqlx::postgres::{PgPool, PgPoolOptions, PgRow};
use std::time::Duration;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

/// PostgreSQL-backed storage.
pub struct PgStore {
    pub(crate) pool: PgPool,
}

impl PgStore {
    /// Connects with a pool of `pool_size` and migrates.
    pub async fn open(url: &str, pool_size: u32) -> Result<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(pool_size.max(1))
            .acquire_timeout(Duration::from_secs(30))
            .connect(url)
            .await?;
        check_and_run(&MIGRATOR, &pool, &redact(url), "postgres").await?;
        Ok(Self { pool })
    }

    /// Saves one (validated) turn in a transaction of its own: PostgreSQL
    /// runs concurrent writers side by side and needs no grouping.
    async fn save_one(&self, ws_id: &str, turn: &crate::types::NewTurn) -> Result<i64> {
        // An explicit transaction, as on SQLite (see `Writer::save_single`).
        let mut tx = self.begin_write().await?;
        let id = Self::insert_one(&mut tx, ws_id, turn).await?;
        tx.commit().await?;
        Ok(id)
    }

    /// Write transactions read a consistent snapshot (forks copy one).
    pub(crate) async fn begin_write(&self) -> Result<WriteTx<sqlx::Postgres>> {
        Ok(WriteTx::new(
            self.pool
                .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ")
                .await?,
            None,
        ))
    }

    /// A connection for a single-statement write (no gate: PostgreSQL locks
    /// rows).
    pub(crate) async fn write_conn(&self) -> Result<WriteConn<sqlx::Postgres>> {
        Ok(WriteConn::new(self.pool.acquire().await?, None))
    }

    /// One model call's usage, written at once (the SQLite store batches).
    pub(crate) async fn record_usage_row(&self, u: &crate::types::UsageEvent) -> Result<()> {
        Self::insert_usage_rows(&mut *self.write_conn().await?, &[u]).await?;
        Ok(())
    }

    pub(crate) async fn search_impl(
        &self,
        tokens: &[String],
        filter: &SearchFilter,
        limit: i64,
    ) -> Result<Vec<PgRow>> {
        // plainto_tsquery ANDs the words and never interprets operators.
        Ok(sqlx::query(
            "SELECT c.id, c.ws_id, c.role, c.content, c.timestamp, c.tool_name, \
             COALESCE(w.title, w.alias, w.name) AS ws_name FROM conversations c \
             JOIN workstreams w ON w.ws_id = c.ws_id \
             WHERE c.content_tsv @@ plainto_tsquery('simple', $1) AND w.state <> 'creating' \
             AND ($2::text IS NULL OR c.ws_id = $2) AND ($3::text IS NULL OR w.user_id = $3) \
             ORDER BY c.id DESC LIMIT $4 OFFSET $5",
        )
        .bind(tokens.join(" "))
        .bind(&filter.ws_id)
        .bind(&filter.user_id)
        .bind(limit)
        .bind(filter.offset.unwrap_or(0).max(0))
        .fetch_all(&self.pool)
        .await?)
    }
}

/// The URL without its password, for messages.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            let user = creds.split(':').next().unwrap_or("");
            format!("{}{}:***@{}", &url[..s + 3], user, &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

// The storage traits, from the SQL shared with the other backend (`crate::ops`).
impl_workstream_store!(PgStore, sqlx::Postgres);
impl_turn_store!(PgStore, sqlx::Postgres);
impl_memory_store!(PgStore, sqlx::Postgres);
impl_identity_store!(PgStore, sqlx::Postgres);
impl_plugin_store!(PgStore, sqlx::Postgres);
impl_skill_store!(PgStore, sqlx::Postgres);
impl_ops_store!(PgStore, sqlx::Postgres);
impl_policy_store!(PgStore, sqlx::Postgres);
impl_attachment_store!(PgStore, sqlx::Postgres);
impl_watch_store!(PgStore, sqlx::Postgres, " FOR UPDATE SKIP LOCKED");
impl_notify_store!(PgStore, sqlx::Postgres);
impl_preview_store!(PgStore, sqlx::Postgres);
impl_channel_store!(PgStore, sqlx::Postgres);

impl crate::backend::Backend for PgStore {
    fn backend_name(&self) -> &'static str {
        "postgresql"
    }

    fn close(&self) -> crate::backend::futures_lite_close::CloseFuture<'_> {
        Box::pin(async move { self.pool.close().await })
    }
}
