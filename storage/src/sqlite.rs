//! The embedded SQLite backend: WAL, busy timeout, foreign keys, FTS5.

use crate::error::{Result, StorageError};
use crate::group_commit::{GroupCommit, Writer};
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
use crate::sqlite_checkpoint::Checkpoints;
use crate::types::SearchFilter;
use crate::write_gate::{WriteGate, WriteTx};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");

/// SQLite-backed storage.
pub struct SqliteStore {
    pub(crate) pool: SqlitePool,
    /// Turn saves and usage rows, committed in groups under load (see
    /// `group_commit`).
    pub(crate) saves: GroupCommit,
    /// The checkpointer's handle: dropped with the store, which ends it.
    pub(crate) _checkpoints: Arc<Checkpoints>,
}

/// An idle connection must not be inside a transaction. One is after SQLite
/// rolled a transaction back by itself (`SQLITE_FULL`, `SQLITE_IOERR`, …):
/// sqlx's rollback-on-drop then fails with "no transaction is active" and
/// leaves the connection's transaction depth at one, so every later `BEGIN`
/// on it fails. Such a connection is closed and the pool opens a fresh one.
async fn discard_if_stuck_in_transaction(
    conn: &mut sqlx::SqliteConnection,
) -> std::result::Result<bool, sqlx::Error> {
    use sqlx::Connection;
    if conn.is_in_transaction() {
        // The rollback queued when the transaction was dropped runs on the
        // connection's worker in order: a ping returns after it has.
        conn.ping().await?;
    }
    Ok(!conn.is_in_transaction())
}

/// The size, in bytes, the log's file shrinks back to at the first commit
/// after the log restarts. SQLite leaves it as large as it ever grew by
/// default; one process's gated writers normally keep it under this
/// (`sqlite_checkpoint`), so what is cut is mostly a log that other
/// processes, a long reader or a slow disk grew.
pub(crate) const JOURNAL_SIZE_LIMIT: u64 = 8 << 20;

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and migrates it.
    pub async fn open(path: &Path) -> Result<Self> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                StorageError::Config(format!("cannot create {}: {e}", parent.display()))
            })?;
        }
        let opts = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // WAL + NORMAL: a crashed or killed process loses nothing it was told
            // was saved; only an OS crash/power loss can drop the newest commits.
            .synchronous(SqliteSynchronous::Normal)
            // Replaced by `sqlite_busy` once connected; this covers opening.
            .busy_timeout(crate::sqlite_busy::BUSY_WAIT)
            .pragma("journal_size_limit", JOURNAL_SIZE_LIMIT.to_string())
            .foreign_keys(true);
        let (checkpoints, checkpoint_requests) = Checkpoints::new();
        let for_connections = Arc::downgrade(&checkpoints);
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .acquire_timeout(Duration::from_secs(60))
            // sqlx pings every idle connection it hands out, a round trip to
            // the connection's worker thread (two thread wake-ups) before each
            // query or transaction. It tests for a peer that went away; an
            // in-process SQLite connection has none, and sqlx pings it on its
            // way back to the pool already, so a broken one never idles here.
            .test_before_acquire(false)
            .after_connect(move |conn, _| {
                let checkpoints = for_connections.clone();
                Box::pin(async move {
                    crate::sqlite_busy::install(conn, checkpoints).await?;
                    crate::sqlite_plans::stable(conn).await
                })
            })
            .before_acquire(|conn, _| Box::pin(discard_if_stuck_in_transaction(conn)))
            .connect_with(opts)
            .await?;
        check_and_run(&MIGRATOR, &pool, &path.display().to_string(), "sqlite").await?;
        let gate = WriteGate::single();
        tokio::spawn(crate::sqlite_checkpoint::run(
            pool.clone(),
            gate.clone(),
            Arc::downgrade(&checkpoints),
            checkpoint_requests,
        ));
        let saves = GroupCommit::new(Writer {
            pool: pool.clone(),
            gate,
        });
        Ok(Self {
            pool,
            saves,
            _checkpoints: checkpoints,
        })
    }

    /// Write transactions take the lock up front (`BEGIN IMMEDIATE`) so a
    /// read-then-write never fails with a busy snapshot under concurrency.
    pub(crate) async fn begin_write(&self) -> Result<WriteTx<sqlx::Sqlite>> {
        self.saves.writer.begin_write().await
    }

    /// Saves one (validated) turn with the saves that wait beside it.
    async fn save_one(&self, ws_id: &str, turn: &crate::types::NewTurn) -> Result<i64> {
        self.saves.save(ws_id, turn).await
    }

    /// One model call's usage, committed with the saves and usage rows that
    /// wait beside it.
    pub(crate) async fn record_usage_row(&self, u: &crate::types::UsageEvent) -> Result<()> {
        self.saves.record_usage(u).await
    }

    pub(crate) async fn search_impl(
        &self,
        tokens: &[String],
        filter: &SearchFilter,
        limit: i64,
    ) -> Result<Vec<SqliteRow>> {
        // Each token as a quoted FTS5 string: user input can never be FTS syntax.
        let fts = tokens
            .iter()
            .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
            .collect::<Vec<_>>()
            .join(" ");
        Ok(sqlx::query(
            "SELECT c.id, c.ws_id, c.role, c.content, c.timestamp, c.tool_name, \
             COALESCE(w.title, w.alias, w.name) AS ws_name FROM conversations_fts \
             JOIN conversations c ON c.id = conversations_fts.rowid \
             JOIN workstreams w ON w.ws_id = c.ws_id \
             WHERE conversations_fts MATCH $1 AND w.state <> 'creating' \
             AND ($2 IS NULL OR c.ws_id = $2) AND ($3 IS NULL OR w.user_id = $3) \
             ORDER BY c.id DESC LIMIT $4 OFFSET $5",
        )
        .bind(fts)
        .bind(&filter.ws_id)
        .bind(&filter.user_id)
        .bind(limit)
        .bind(filter.offset.unwrap_or(0).max(0))
        .fetch_all(&self.pool)
        .await?)
    }
}

// The storage traits, from the SQL shared with the other backend (`crate::ops`).
impl_workstream_store!(SqliteStore, sqlx::Sqlite);
impl_turn_store!(SqliteStore, sqlx::Sqlite);
impl_memory_store!(SqliteStore, sqlx::Sqlite);
impl_identity_store!(SqliteStore, sqlx::Sqlite);
impl_plugin_store!(SqliteStore, sqlx::Sqlite);
impl_skill_store!(SqliteStore, sqlx::Sqlite);
impl_ops_store!(SqliteStore, sqlx::Sqlite);
impl_policy_store!(SqliteStore, sqlx::Sqlite);
impl_attachment_store!(SqliteStore, sqlx::Sqlite);
impl_watch_store!(SqliteStore, sqlx::Sqlite, "");
impl_notify_store!(SqliteStore, sqlx::Sqlite);
impl_preview_store!(SqliteStore, sqlx::Sqlite);
impl_channel_store!(SqliteStore, sqlx::Sqlite);

impl crate::backend::Backend for SqliteStore {
    fn backend_name(&self) -> &'static str {
        "sqlite"
    }

    fn close(&self) -> crate::backend::futures_lite_close::CloseFuture<'_> {
        Box::pin(async move { self.pool.close().await })
    }
}
