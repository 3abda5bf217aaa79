//! Group commit of turn saves and model usage rows, for SQLite.
//!
//! Every turn saves its messages as they complete, each in a write
//! transaction of its own, and SQLite has one writer at a time. When many
//! turns end together (a burst of workstreams answering at once), the saves
//! queue on the write gate and each pays a whole transaction: `BEGIN`, the
//! insert, and a `COMMIT` that appends its pages to the WAL and flushes the
//! full-text index's pending terms into a new segment. Here, saves that
//! arrive while a group is being written wait for the next group, which
//! writes them all in one transaction and one multi-row `INSERT`. A save
//! that finds nothing in flight starts a group of one at once, so a lone
//! save is not delayed; the batching comes only from saves that would have
//! queued anyway.
//!
//! Each caller is answered once its group has committed, so when a save
//! returns, every connection sees its turn, as before. If a group fails (a
//! deleted workstream, a full disk), its saves are retried one by one, each
//! in its own transaction, so each caller gets its own result and one bad
//! row does not fail the others.
//!
//! Model usage rows (one per model call, written as each call ends) take
//! the same queue: in a burst they were most of the write transactions,
//! each holding the write gate while the turns' saves waited behind it. A
//! usage row that finds nothing in flight is written at once, on its own,
//! as before.

use crate::error::{Result, StorageError};
use crate::sqlite::SqliteStore;
use crate::types::{NewTurn, UsageEvent};
use crate::write_gate::{WriteConn, WriteGate, WriteTx};
use sqlx::sqlite::SqlitePool;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::oneshot;

/// Most saves (and, beside them, most usage rows) written in one
/// transaction: the transaction holds the write gate, so a very long group
/// would delay other writers (settings, memories).
const MAX_GROUP: usize = 256;

/// One turn waiting to be saved.
struct Save {
    ws_id: String,
    turn: NewTurn,
    done: oneshot::Sender<Result<i64>>,
}

/// One model call's usage row waiting to be written.
struct UsageSave {
    event: UsageEvent,
    done: oneshot::Sender<Result<()>>,
}

#[derive(Default)]
struct Queue {
    pending: Vec<Save>,
    /// Usage rows, written in the same transactions as the saves.
    usage: Vec<UsageSave>,
    /// A writer task is running; it takes whatever is pending before it ends.
    writing: bool,
}

/// Where a store writes and how it takes its turn to.
#[derive(Clone, Debug)]
pub(crate) struct Writer {
    pub(crate) pool: SqlitePool,
    /// One writer of this process at a time (see `write_gate`).
    pub(crate) gate: WriteGate,
}

impl Writer {
    /// Write transactions take the lock up front (`BEGIN IMMEDIATE`) so a
    /// read-then-write never fails with a busy snapshot under concurrency.
    pub(crate) async fn begin_write(&self) -> Result<WriteTx<sqlx::Sqlite>> {
        let turn = self.gate.enter().await?;
        Ok(WriteTx::new(
            self.pool.begin_with("BEGIN IMMEDIATE").await?,
            turn,
        ))
    }

    /// A connection for one autocommit statement, queued behind this
    /// process's other writers.
    pub(crate) async fn write_conn(&self) -> Result<WriteConn<sqlx::Sqlite>> {
        let turn = self.gate.enter().await?;
        Ok(WriteConn::new(self.pool.acquire().await?, turn))
    }

    /// One usage row on its own, in autocommit as before this queue (one
    /// statement, not three). Unlike a save, a usage row is read only by
    /// later summaries, never right after it is written, so it does not need
    /// the visibility an explicit transaction guarantees (see `save_single`).
    /// A row may therefore show on other connections a moment after this
    /// returns; the tests wait for it.
    async fn usage_single(&self, event: &UsageEvent) -> Result<()> {
        SqliteStore::insert_usage_rows(&mut *self.write_conn().await?, &[event]).await?;
        Ok(())
    }

    /// One turn in a transaction of its own. An explicit transaction: when
    /// COMMIT answers, every other connection sees the turn. In autocommit a
    /// reader on another connection sometimes missed it: with `RETURNING`
    /// (sqlx#3430), and also with a plain `INSERT` run by `execute` (tried on
    /// 2026-12-05: `storage/tests/turns.rs` failed 5 runs in 30, against none
    /// in 30 with the transaction).
    async fn save_single(&self, ws_id: &str, turn: &NewTurn) -> Result<i64> {
        let mut tx = self.begin_write().await?;
        let id = SqliteStore::insert_one(&mut tx, ws_id, turn).await?;
        tx.commit().await?;
        Ok(id)
    }

    /// All of `group` and `usage` in `tx`, committed; the turns' ids in
    /// `group`'s order.
    async fn save_group(
        &self,
        mut tx: WriteTx<sqlx::Sqlite>,
        group: &[Save],
        usage: &[UsageSave],
    ) -> Result<Vec<i64>> {
        let rows: Vec<(&str, &NewTurn)> =
            group.iter().map(|s| (s.ws_id.as_str(), &s.turn)).collect();
        let ids = SqliteStore::insert_rows(&mut tx, &rows).await?;
        if !usage.is_empty() {
            let events: Vec<&UsageEvent> = usage.iter().map(|u| &u.event).collect();
            SqliteStore::insert_usage_rows(&mut tx, &events).await?;
        }
        if ids.len() != group.len() {
            // Not expected (every row is inserted or the statement fails);
            // the one-by-one path then tells each caller what happened.
            return Err(StorageError::Config(format!(
                "a group insert of {} turns returned {} ids",
                group.len(),
                ids.len()
            )));
        }
        tx.commit().await?;
        Ok(ids)
    }
}

/// The saves and usage rows of one store, committed in groups.
#[derive(Clone)]
pub(crate) struct GroupCommit {
    /// Also the store's way to begin its other write transactions.
    pub(crate) writer: Writer,
    queue: Arc<Mutex<Queue>>,
    /// Groups of more than one row (saves and usage rows together)
    /// committed in one transaction.
    grouped: Arc<AtomicU64>,
}

impl std::fmt::Debug for GroupCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit").finish_non_exhaustive()
    }
}

fn lock(queue: &Mutex<Queue>) -> MutexGuard<'_, Queue> {
    queue.lock().unwrap_or_else(|p| p.into_inner())
}

impl GroupCommit {
    /// Group commit for saves through `writer`.
    pub(crate) fn new(writer: Writer) -> Self {
        Self {
            writer,
            queue: Arc::default(),
            grouped: Arc::default(),
        }
    }

    /// Groups of more than one row committed together so far.
    #[cfg(test)]
    fn grouped(&self) -> u64 {
        self.grouped.load(Ordering::Relaxed)
    }

    /// Saves and usage rows waiting for a writer to take them.
    #[cfg(test)]
    fn pending(&self) -> usize {
        let q = lock(&self.queue);
        q.pending.len() + q.usage.len()
    }

    /// Saves `turn` (already validated) with whatever other saves are
    /// waiting; returns its id once it is committed.
    pub(crate) async fn save(&self, ws_id: &str, turn: &NewTurn) -> Result<i64> {
        let (done, answer) = oneshot::channel();
        self.enqueue(|q| {
            q.pending.push(Save {
                ws_id: ws_id.to_string(),
                turn: turn.clone(),
                done,
            })
        });
        // The writer answers every save it takes; it is gone only if the
        // runtime shut down under it.
        answer
            .await
            .unwrap_or(Err(StorageError::Database(sqlx::Error::WorkerCrashed)))
    }

    /// Writes one model call's usage row with whatever saves and usage rows
    /// are waiting; returns once it is committed.
    pub(crate) async fn record_usage(&self, event: &UsageEvent) -> Result<()> {
        let (done, answer) = oneshot::channel();
        self.enqueue(|q| {
            q.usage.push(UsageSave {
                event: event.clone(),
                done,
            })
        });
        answer
            .await
            .unwrap_or(Err(StorageError::Database(sqlx::Error::WorkerCrashed)))
    }

    /// Adds to the queue and starts a writer if none runs.
    fn enqueue(&self, add: impl FnOnce(&mut Queue)) {
        let start = {
            let mut q = lock(&self.queue);
            add(&mut q);
            !std::mem::replace(&mut q.writing, true)
        };
        if start {
            // A task of its own, not this caller's future: a caller that is
            // cancelled must not abandon the others' saves.
            tokio::spawn(self.clone().write());
        }
    }

    /// Writes groups until nothing is pending.
    async fn write(self) {
        // If this task is dropped (the runtime shuts down), the next save
        // starts a writer again; the saves taken so far are answered with
        // an error when their senders drop.
        let mut running = Running(Some(&self.queue));
        loop {
            let (group, usage): (Vec<Save>, Vec<UsageSave>) = {
                let mut q = lock(&self.queue);
                if q.pending.is_empty() && q.usage.is_empty() {
                    q.writing = false;
                    running.0 = None;
                    return;
                }
                let n = q.pending.len().min(MAX_GROUP);
                let m = q.usage.len().min(MAX_GROUP);
                (q.pending.drain(..n).collect(), q.usage.drain(..m).collect())
            };
            self.write_group(group, usage).await;
        }
    }

    async fn write_group(&self, group: Vec<Save>, usage: Vec<UsageSave>) {
        if group.len() + usage.len() > 1 {
            let tx = match self.writer.begin_write().await {
                Ok(tx) => tx,
                Err(e) => {
                    // No row is to blame (the lock stayed taken past the
                    // wait, the store is closing): one by one, each save
                    // would only wait again. Each gets the group's error.
                    for save in group {
                        let _ = save.done.send(Err(same_kind(&e)));
                    }
                    for u in usage {
                        let _ = u.done.send(Err(same_kind(&e)));
                    }
                    return;
                }
            };
            match self.writer.save_group(tx, &group, &usage).await {
                Ok(ids) => {
                    self.grouped.fetch_add(1, Ordering::Relaxed);
                    for (save, id) in group.into_iter().zip(ids) {
                        let _ = save.done.send(Ok(id));
                    }
                    for u in usage {
                        let _ = u.done.send(Ok(()));
                    }
                    return;
                }
                Err(e) => tracing::debug!(
                    "a group of {} turn saves and {} usage rows failed ({e}); writing them one by one",
                    group.len(),
                    usage.len()
                ),
            }
        }
        for save in group {
            let result = self.writer.save_single(&save.ws_id, &save.turn).await;
            let _ = save.done.send(result);
        }
        for u in usage {
            let _ = u.done.send(self.writer.usage_single(&u.event).await);
        }
    }
}

/// An error like `e` for one more caller (a database error cannot be cloned):
/// "busy, try again" stays so (HTTP 503), as does a closed store.
fn same_kind(e: &StorageError) -> StorageError {
    match e {
        e if e.is_transient() => StorageError::Database(sqlx::Error::PoolTimedOut),
        StorageError::Database(sqlx::Error::PoolClosed) => {
            StorageError::Database(sqlx::Error::PoolClosed)
        }
        other => StorageError::Database(sqlx::Error::Protocol(format!(
            "the write transaction could not begin: {other}"
        ))),
    }
}

/// Clears the queue's `writing` flag if the writer task is dropped early.
struct Running<'a>(Option<&'a Mutex<Queue>>);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if let Some(queue) = self.0 {
            lock(queue).writing = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{OpsStore, TurnStore, WorkstreamStore};
    use crate::types::{LoadMode, NewWorkstream, Role};
    use std::collections::HashMap;
    use std::time::Duration;

    async fn store() -> (tempfile::TempDir, Arc<SqliteStore>) {
        let dir = tempfile::tempdir().unwrap();
        let db = SqliteStore::open(&dir.path().join("t.db")).await.unwrap();
        (dir, Arc::new(db))
    }

    async fn workstream(db: &SqliteStore) -> String {
        let r = db
            .create_workstream(&NewWorkstream::default())
            .await
            .unwrap();
        db.publish_workstream(&r).await.unwrap();
        r.ws_id
    }

    /// Waits until `n` saves and usage rows are queued (the writer then waits
    /// on the gate).
    async fn until_pending(db: &SqliteStore, n: usize) {
        for _ in 0..5_000 {
            if db.saves.pending() == n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!(
            "{n} saves and usage rows never queued (now {})",
            db.saves.pending()
        );
    }

    fn save(
        db: &Arc<SqliteStore>,
        ws: &str,
        text: String,
    ) -> tokio::task::JoinHandle<(String, String, Result<i64>)> {
        let (db, ws) = (db.clone(), ws.to_string());
        tokio::spawn(async move {
            let r = db.save_turn(&ws, &NewTurn::text(Role::User, &text)).await;
            (ws, text, r)
        })
    }

    /// Holds the write lock; one save takes the writer, which then waits for
    /// the lock with that save alone, so the saves queued after it go out
    /// as one group when the lock is released.
    async fn with_writer_waiting(
        db: &Arc<SqliteStore>,
        ws: &str,
    ) -> (
        WriteTx<sqlx::Sqlite>,
        tokio::task::JoinHandle<(String, String, Result<i64>)>,
    ) {
        let held = db.begin_write().await.unwrap();
        let first = save(db, ws, "first".into());
        // The writer has taken it: nothing is pending, and a writer runs.
        for _ in 0..5_000 {
            let taken = {
                let q = lock(&db.saves.queue);
                q.pending.is_empty() && q.writing
            };
            if taken {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        (held, first)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn saves_that_wait_together_commit_as_one_group_with_the_right_ids() {
        let (_dir, db) = store().await;
        let mut spaces = Vec::new();
        for _ in 0..4 {
            spaces.push(workstream(&db).await);
        }
        let (held, first) = with_writer_waiting(&db, &spaces[0]).await;
        let saves: Vec<_> = (0..40)
            .map(|i| save(&db, &spaces[i % 4], format!("turn {i}")))
            .collect();
        until_pending(&db, 40).await;
        assert_eq!(db.saves.grouped(), 0);
        drop(held);
        let mut saved: HashMap<i64, (String, String)> = HashMap::new();
        for task in std::iter::once(first).chain(saves) {
            let (ws, text, r) = task.await.unwrap();
            let id = r.unwrap_or_else(|e| panic!("{text}: {e}"));
            assert!(saved.insert(id, (ws, text)).is_none(), "id {id} twice");
        }
        assert_eq!(db.saves.grouped(), 1, "the 40 queued saves were one group");
        // Each caller got the id of its own row, in its own workstream.
        let mut rows = 0;
        for ws in &spaces {
            for t in db.load_turns(ws, LoadMode::Everything).await.unwrap() {
                let (want_ws, want_text) = &saved[&t.id];
                assert_eq!(
                    (&t.ws_id, t.turn.content.as_ref()),
                    (want_ws, Some(want_text))
                );
                rows += 1;
            }
        }
        assert_eq!(rows, 41);
    }

    /// A usage row whose every field follows from `n` (its ws `ws`).
    fn event(ws: &str, n: i64) -> UsageEvent {
        UsageEvent {
            user_id: Some(format!("user-{n}")),
            ws_id: Some(ws.to_string()),
            model: Some(format!("model-{n}")),
            model_alias: Some(format!("alias-{n}")),
            prompt_tokens: n,
            completion_tokens: n + 1,
            cached_tokens: n + 2,
            cache_creation_tokens: n + 3,
            reasoning_tokens: n + 4,
            tool_calls: n + 5,
            latency_ms: n + 6,
            // An empty purpose is stored as "turn".
            purpose: if n % 2 == 0 {
                String::new()
            } else {
                "title".into()
            },
        }
    }

    fn usage(db: &Arc<SqliteStore>, ws: &str, n: i64) -> tokio::task::JoinHandle<Result<()>> {
        let db = db.clone();
        let event = event(ws, n);
        tokio::spawn(async move { db.record_usage(&event).await })
    }

    /// A usage row as stored: every column but the id and the timestamp.
    type UsageRow = (
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
        i64,
        i64,
        i64,
        i64,
        i64,
        i64,
        i64,
        String,
    );

    /// The usage rows written, by prompt tokens.
    async fn usage_rows(db: &SqliteStore) -> Vec<UsageRow> {
        sqlx::query_as(
            "SELECT user_id, ws_id, model, model_alias, prompt_tokens, completion_tokens, cached_tokens, \
             cache_creation_tokens, reasoning_tokens, tool_calls, latency_ms, purpose \
             FROM usage_events ORDER BY prompt_tokens",
        )
        .fetch_all(&db.pool)
        .await
        .unwrap()
    }

    /// The rows [`event`] makes for `ns` in workstream `ws`.
    fn expected_usage(ws: &str, ns: impl IntoIterator<Item = i64>) -> Vec<UsageRow> {
        ns.into_iter()
            .map(|n| {
                let e = event(ws, n);
                let purpose = if e.purpose.is_empty() {
                    "turn".to_string()
                } else {
                    e.purpose
                };
                (
                    e.user_id,
                    e.ws_id,
                    e.model,
                    e.model_alias,
                    e.prompt_tokens,
                    e.completion_tokens,
                    e.cached_tokens,
                    e.cache_creation_tokens,
                    e.reasoning_tokens,
                    e.tool_calls,
                    e.latency_ms,
                    purpose,
                )
            })
            .collect()
    }

    /// Waits (up to 5 s) until the usage rows are `want`, then checks them: a
    /// row written in autocommit may show on another connection a moment
    /// after its write returned.
    async fn assert_usage_rows(db: &SqliteStore, want: Vec<UsageRow>) {
        for _ in 0..500 {
            if usage_rows(db).await == want {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(usage_rows(db).await, want);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn usage_rows_that_wait_commit_in_the_saves_group() {
        let (_dir, db) = store().await;
        let ws = workstream(&db).await;
        let (held, first) = with_writer_waiting(&db, &ws).await;
        // One save alone would not be a group: it is one only if the usage
        // rows joined it.
        let one = save(&db, &ws, "t1".into());
        let rows: Vec<_> = (10..15).map(|n| usage(&db, &ws, n)).collect();
        until_pending(&db, 6).await;
        // Nothing of them is written while the writer waits for the lock.
        assert!(usage_rows(&db).await.is_empty());
        drop(held);
        first.await.unwrap().2.unwrap();
        let (_, _, r) = one.await.unwrap();
        r.unwrap();
        for task in rows {
            task.await.unwrap().unwrap();
        }
        assert_eq!(
            db.saves.grouped(),
            1,
            "the save and the five usage rows were one group"
        );
        // Committed in one transaction with the save: visible at once.
        assert_eq!(usage_rows(&db).await, expected_usage(&ws, 10..15));
        assert_eq!(db.count_turns(&ws).await.unwrap(), 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lone_usage_row_is_written_at_once_and_groups_of_usage_alone_commit() {
        let (_dir, db) = store().await;
        let ws = workstream(&db).await;
        usage(&db, &ws, 2).await.unwrap().unwrap();
        assert_usage_rows(&db, expected_usage(&ws, [2])).await;
        assert_eq!(db.saves.grouped(), 0, "a row alone is not a group");
        // Usage rows with no save beside them still go out together.
        let (held, first) = with_writer_waiting(&db, &ws).await;
        let rows: Vec<_> = (3..7).map(|n| usage(&db, &ws, n)).collect();
        until_pending(&db, 4).await;
        drop(held);
        first.await.unwrap().2.unwrap();
        for task in rows {
            task.await.unwrap().unwrap();
        }
        assert_eq!(db.saves.grouped(), 1);
        assert_eq!(usage_rows(&db).await, expected_usage(&ws, 2..7));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_bad_save_in_a_group_leaves_its_usage_rows_written() {
        let (_dir, db) = store().await;
        let ws = workstream(&db).await;
        let (held, first) = with_writer_waiting(&db, &ws).await;
        let bad = save(&db, "no-such-workstream", "lost".into());
        let rows: Vec<_> = (20..23).map(|n| usage(&db, &ws, n)).collect();
        until_pending(&db, 4).await;
        drop(held);
        first.await.unwrap().2.unwrap();
        let (_, _, r) = bad.await.unwrap();
        assert!(
            matches!(r, Err(StorageError::UnknownWorkstream(_))),
            "{r:?}"
        );
        for task in rows {
            task.await.unwrap().unwrap();
        }
        // Written one by one, in autocommit, after the group failed.
        assert_usage_rows(&db, expected_usage(&ws, 20..23)).await;
        assert_eq!(db.saves.grouped(), 0, "the failed group was not counted");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_bad_save_in_a_group_fails_alone() {
        let (_dir, db) = store().await;
        let ws = workstream(&db).await;
        let (held, first) = with_writer_waiting(&db, &ws).await;
        let good: Vec<_> = (0..5)
            .map(|i| save(&db, &ws, format!("good {i}")))
            .collect();
        let bad = save(&db, "no-such-workstream", "lost".into());
        until_pending(&db, 6).await;
        drop(held);
        first.await.unwrap().2.unwrap();
        for task in good {
            let (_, text, r) = task.await.unwrap();
            r.unwrap_or_else(|e| panic!("{text}: {e}"));
        }
        let (_, _, r) = bad.await.unwrap();
        assert!(
            matches!(r, Err(StorageError::UnknownWorkstream(ref w)) if w == "no-such-workstream"),
            "{r:?}"
        );
        assert_eq!(db.count_turns(&ws).await.unwrap(), 6);
        assert_eq!(db.saves.grouped(), 0, "the failed group was not counted");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancelled_caller_leaves_the_others_saved() {
        let (_dir, db) = store().await;
        let ws = workstream(&db).await;
        let (held, first) = with_writer_waiting(&db, &ws).await;
        let saves: Vec<_> = (0..3).map(|i| save(&db, &ws, format!("t{i}"))).collect();
        until_pending(&db, 3).await;
        saves[1].abort();
        drop(held);
        first.await.unwrap().2.unwrap();
        for (i, task) in saves.into_iter().enumerate() {
            match task.await {
                Ok((_, text, r)) => {
                    r.unwrap_or_else(|e| panic!("{text}: {e}"));
                }
                Err(e) => assert!(i == 1 && e.is_cancelled(), "{i}: {e}"),
            }
        }
        // The cancelled caller's turn was written with its group: a turn the
        // engine handed over is not lost because its caller went away.
        assert_eq!(db.count_turns(&ws).await.unwrap(), 4);
        // The store goes on saving.
        db.save_turn(&ws, &NewTurn::text(Role::User, "after"))
            .await
            .unwrap();
        assert_eq!(db.count_turns(&ws).await.unwrap(), 5);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_group_that_cannot_begin_gives_every_save_a_clear_error() {
        let (_dir, db) = store().await;
        let ws = workstream(&db).await;
        let (held, first) = with_writer_waiting(&db, &ws).await;
        let saves: Vec<_> = (0..4).map(|i| save(&db, &ws, format!("t{i}"))).collect();
        until_pending(&db, 4).await;
        // The store closes while the saves wait: no transaction can begin.
        let pool = db.pool.clone();
        let closing = tokio::spawn(async move { pool.close().await });
        while !db.pool.is_closed() {
            tokio::task::yield_now().await;
        }
        drop(held);
        for task in std::iter::once(first).chain(saves) {
            let (_, text, r) = tokio::time::timeout(Duration::from_secs(10), task)
                .await
                .unwrap_or_else(|_| panic!("a save hung on a closed store"))
                .unwrap();
            assert!(
                matches!(r, Err(StorageError::Database(sqlx::Error::PoolClosed))),
                "{text}: {r:?}"
            );
        }
        closing.await.unwrap();
    }
}
