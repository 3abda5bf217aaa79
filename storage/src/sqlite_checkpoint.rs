//! Checkpoints of SQLite's write-ahead log, run beside the writers instead of
//! inside a commit.
//!
//! SQLite's default WAL hook checkpoints on the connection that has just
//! committed, once the log holds 1,000 frames. That commit returns only after
//! the checkpoint has copied the log's pages into the database and synced
//! both files: 11–13 ms on the machines of `docs/storage.md`, two `fsync`s.
//! Writers here queue on one gate and turn saves are committed in groups, so
//! every writer behind that commit waited for the checkpoint too; in the run
//! of the serve bench traced, the 100-turn burst met one such stall and the
//! 200-turn burst two.
//!
//! A passive checkpoint does not need the write lock: SQLite lets it copy
//! pages while another connection appends to the log. So the hook
//! (`sqlite_busy::on_commit`) only asks the store's checkpointer, a task that
//! runs `PRAGMA wal_checkpoint(PASSIVE)` on a connection of the pool, and the
//! commit returns at once. Requests made while one is pending are merged.
//! Frames that writers appended during the copy are copied by a second,
//! short checkpoint with the store's write gate held, so the log still
//! restarts from its start instead of growing under steady writes. Should a
//! copy take so long (a slow or busy disk) that the log reaches
//! [`BACKLOG_FRAMES`], commits wait for it and checkpoint themselves again.
//! A connection without a live checkpointer (its store dropped) checkpoints
//! inline, as SQLite's own hook does.
//!
//! None of that restarts the log while another process (another store on
//! the same file) writes too: the next write restarts it only if it began
//! after every frame was copied and no reader is left in the log, and the
//! other process's writers append at any moment. Four stores writing at
//! once grew it to 167 MB. So once a commit finds the log at
//! [`RESTART_FRAMES`] or more, the checkpointer runs
//! `wal_checkpoint(RESTART)`: it waits for the write lock, which holds off
//! every process's writers, copies the rest and waits for the readers to
//! leave the log (the two waits together at most
//! `sqlite_busy::RESTART_WAIT`), and the next write restarts the log. A
//! restart that gave up waiting is not tried again for [`RESTART_BACKOFF`],
//! so a long reader costs the writers one such wait, not one per cycle. The
//! file shrinks back to `JOURNAL_SIZE_LIMIT` (`sqlite.rs`) at the first
//! commit after a restart, if that commit is one of ours; SQLite keeps it as
//! large as it grew by default.

use crate::write_gate::WriteGate;
use libsqlite3_sys::{SQLITE_OK, sqlite3, sqlite3_set_clientdata};
use sqlx::{SqliteConnection, SqlitePool};
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError, Weak};
use std::time::Duration;
use tokio::sync::mpsc;

/// The key of a connection's reference to its checkpointer in SQLite's
/// per-connection client data, which drops it when the connection closes.
const CLIENT_DATA_KEY: &std::ffi::CStr = c"turnstone.checkpointer";

/// Frames in the log past which a commit no longer leaves the copy to the
/// checkpointer: it waits for the copy under way and checkpoints itself, as
/// SQLite's own hook does, so a slow disk slows the writers instead of
/// growing the log without bound (7.4 MB of 4 KiB pages, below the 8 MiB
/// the tests allow it).
pub(crate) const BACKLOG_FRAMES: c_int = 1_800;

/// Frames in the log past which the checkpointer makes the next write
/// restart it, waiting for other processes' writers and readers (33 MB of
/// 4 KiB pages). One process's gated writers reach it only past the backlog
/// rule: a transaction that large, or a reader that keeps the log in use.
pub(crate) const RESTART_FRAMES: c_int = 8_000;

/// How long after a restart that gave up waiting (a reader stayed in the log
/// past `sqlite_busy::RESTART_WAIT`) the checkpointer tries none.
const RESTART_BACKOFF: Duration = Duration::from_secs(10);

/// How long such a commit waits for the copy under way before it checkpoints
/// anyway (its passive checkpoint then copies nothing while that one runs).
const BACKLOG_WAIT: Duration = Duration::from_secs(5);

/// A store's way to its checkpointer. The store holds the only strong
/// reference; connections hold weak ones, so dropping the store ends the task.
#[derive(Debug)]
pub(crate) struct Checkpoints {
    wanted: mpsc::Sender<()>,
    /// Copies run beside the writers so far.
    copies: AtomicU64,
    /// Commits that found the log past [`BACKLOG_FRAMES`] so far.
    backlogs: AtomicU64,
    /// Restarts of a log past [`RESTART_FRAMES`] so far (that did not give up).
    restarts: AtomicU64,
    /// Restarts that gave up waiting for a writer or reader so far.
    gave_up: AtomicU64,
    /// Whether a commit found the log at [`RESTART_FRAMES`] or more since
    /// the checkpointer last looked.
    restart_wanted: AtomicBool,
    /// Whether the checkpointer is copying beside the writers now.
    copying: Mutex<bool>,
    copied: Condvar,
}

/// Requests for a checkpoint, waiting for [`run`].
pub(crate) struct Requests(mpsc::Receiver<()>);

impl Checkpoints {
    /// A checkpointer's handle and the requests [`run`] serves.
    pub(crate) fn new() -> (Arc<Self>, Requests) {
        // One slot: a request made while one waits adds nothing.
        let (wanted, requests) = mpsc::channel(1);
        let checkpoints = Self {
            wanted,
            copies: AtomicU64::new(0),
            backlogs: AtomicU64::new(0),
            restarts: AtomicU64::new(0),
            gave_up: AtomicU64::new(0),
            restart_wanted: AtomicBool::new(false),
            copying: Mutex::new(false),
            copied: Condvar::new(),
        };
        (Arc::new(checkpoints), Requests(requests))
    }

    /// Copies the checkpointer has run beside the writers so far.
    #[cfg(test)]
    pub(crate) fn copies(&self) -> u64 {
        self.copies.load(Ordering::Relaxed)
    }

    /// Commits that found the log past [`BACKLOG_FRAMES`] so far.
    #[cfg(test)]
    pub(crate) fn backlogs(&self) -> u64 {
        self.backlogs.load(Ordering::Relaxed)
    }

    /// Restarts of a log past [`RESTART_FRAMES`] so far (that did not give up).
    #[cfg(test)]
    pub(crate) fn restarts(&self) -> u64 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// Restarts that gave up waiting so far.
    #[cfg(test)]
    pub(crate) fn gave_up(&self) -> u64 {
        self.gave_up.load(Ordering::Relaxed)
    }

    fn set_copying(&self, now: bool) {
        *self.copying.lock().unwrap_or_else(PoisonError::into_inner) = now;
        if !now {
            self.copied.notify_all();
        }
    }

    /// Blocks until no copy runs beside the writers, or [`BACKLOG_WAIT`].
    /// Called on a connection's worker thread, never on a tokio worker.
    fn wait_for_copy(&self) {
        let copying = self.copying.lock().unwrap_or_else(PoisonError::into_inner);
        drop(
            self.copied
                .wait_timeout_while(copying, BACKLOG_WAIT, |copying| *copying),
        );
    }
}

/// Serves checkpoint requests on `pool` until the store's [`Checkpoints`] is
/// dropped (once the pool is closed, it ends at the next request). `gate` is
/// the store's write gate.
pub(crate) async fn run(
    pool: SqlitePool,
    gate: WriteGate,
    checkpoints: Weak<Checkpoints>,
    mut requests: Requests,
) {
    // Until when no restart is tried, after one that gave up waiting.
    let mut no_restart_until: Option<tokio::time::Instant> = None;
    while requests.0.recv().await.is_some() {
        let Some(handle) = checkpoints.upgrade() else {
            break;
        };
        // The bulk of the log, copied beside the writers. `copying` is set
        // only once the connection is ours: a commit waiting for the copy
        // may hold the pool's last connection.
        let mut conn = match pool.acquire().await {
            Ok(conn) => conn,
            Err(sqlx::Error::PoolClosed) => break,
            Err(e) => {
                // The next commit past 1,000 frames asks again.
                tracing::warn!(error = %e, "no connection for a WAL checkpoint");
                continue;
            }
        };
        let bulk = {
            let _copying = Copying::start(&handle);
            checkpoint(&mut conn).await
        };
        handle.copies.fetch_add(1, Ordering::Relaxed);
        drop(handle);
        if let Err(sqlx::Error::PoolClosed) = bulk {
            break;
        }
        // The next write restarts the log from its start only if it began
        // once every frame was copied. A writer that began during the copy
        // appends instead, and under steady writes that happened every time
        // (the log grew to 60 MB in `sqlite_wal_is_checkpointed_as_commits_
        // pile_up`), even when the copy had reached the log's end. So what
        // was appended meanwhile is copied with the write gate held, and the
        // next gated writer begins after it.
        let Ok(_turn) = gate.enter().await else {
            continue;
        };
        // Requests made by commits until now are answered by this pass; a
        // commit after it (none of this process's gated writers can commit
        // before it ends) asks again.
        while requests.0.try_recv().is_ok() {}
        let tail = checkpoint(&mut conn).await;
        if let Err(sqlx::Error::PoolClosed) = tail {
            break;
        }
        // The commits' word counts even when this pass could not tell the
        // log's size (another connection held the checkpoint lock).
        let Some(handle) = checkpoints.upgrade() else {
            break;
        };
        let wanted = handle.restart_wanted.swap(false, Ordering::Relaxed)
            || matches!(tail, Ok(Some((frames, _))) if frames >= i64::from(RESTART_FRAMES));
        if !wanted || no_restart_until.is_some_and(|t| tokio::time::Instant::now() < t) {
            continue;
        }
        // The restart swaps the connection's busy handler for a while. The
        // connection is closed afterwards rather than pooled, so that were
        // this task dropped meanwhile, nobody else would get it with the
        // short wait; restarts are rare, and the pool opens another.
        conn.close_on_drop();
        match restart(&mut conn).await {
            Ok(Restart::Done) => {
                handle.restarts.fetch_add(1, Ordering::Relaxed);
                no_restart_until = None;
            }
            // Another connection is checkpointing: no wait was spent, and the
            // next commit past the mark asks again.
            Ok(Restart::CheckpointBusy) => handle.restart_wanted.store(true, Ordering::Relaxed),
            Ok(Restart::GaveUp) => {
                handle.gave_up.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    wait = ?crate::sqlite_busy::RESTART_WAIT,
                    retry_in = ?RESTART_BACKOFF,
                    "the WAL could not be restarted: a reader or writer stayed in it"
                );
                no_restart_until = Some(tokio::time::Instant::now() + RESTART_BACKOFF);
            }
            Err(sqlx::Error::PoolClosed) => break,
            Err(_) => {}
        }
    }
}

/// How a restart of the log ended.
#[derive(Debug, PartialEq, Eq)]
enum Restart {
    /// Every frame copied and no reader left in the log: the next write
    /// restarts it.
    Done,
    /// Another connection held the checkpoint lock, so nothing was tried.
    CheckpointBusy,
    /// A writer or reader stayed past the wait.
    GaveUp,
}

/// Waits for the write lock, copies the whole log and waits for every
/// process's readers to leave it, so the next write restarts it; the two
/// waits together at most `sqlite_busy::RESTART_WAIT`. Every process's
/// writers wait while it holds the write lock.
async fn restart(conn: &mut SqliteConnection) -> Result<Restart, sqlx::Error> {
    crate::sqlite_busy::set_restarting(conn, true).await?;
    let done = sqlx::query_as::<_, (i64, i64, i64)>("PRAGMA wal_checkpoint(RESTART)")
        .fetch_one(&mut *conn)
        .await;
    // Back to the usual wait before the connection serves anyone else.
    let reset = crate::sqlite_busy::set_restarting(conn, false).await;
    match done {
        Ok((busy, frames, copied)) => {
            tracing::debug!(busy, frames, copied, "WAL restart");
            reset?;
            Ok(match (busy, frames) {
                (0, _) => Restart::Done,
                (_, -1) => Restart::CheckpointBusy,
                _ => Restart::GaveUp,
            })
        }
        Err(e) => {
            if !matches!(e, sqlx::Error::PoolClosed) {
                tracing::warn!(error = %e, "WAL restart failed");
            }
            reset.and(Err(e))
        }
    }
}

/// Marks a copy beside the writers under way, until dropped (also when the
/// task is dropped mid-copy, so no commit waits for a copy that has ended).
struct Copying<'a>(&'a Checkpoints);

impl<'a> Copying<'a> {
    fn start(checkpoints: &'a Checkpoints) -> Self {
        checkpoints.set_copying(true);
        Self(checkpoints)
    }
}

impl Drop for Copying<'_> {
    fn drop(&mut self) {
        self.0.set_copying(false);
    }
}

/// One passive checkpoint: the frames in the log and how many of them are
/// now copied into the database (`None` when another connection held the
/// checkpoint lock, or the database is not in WAL mode). A failure other
/// than a closed pool is logged; the log keeps every commit and the next
/// request tries again.
async fn checkpoint(conn: &mut SqliteConnection) -> Result<Option<(i64, i64)>, sqlx::Error> {
    let done = sqlx::query_as::<_, (i64, i64, i64)>("PRAGMA wal_checkpoint(PASSIVE)")
        .fetch_one(conn)
        .await;
    match done {
        Ok((_, frames, copied)) if frames >= 0 => {
            tracing::trace!(frames, copied, "WAL checkpoint");
            Ok(Some((frames, copied)))
        }
        Ok(_) => Ok(None),
        Err(e) => {
            if !matches!(e, sqlx::Error::PoolClosed) {
                tracing::warn!(error = %e, "WAL checkpoint failed");
            }
            Err(e)
        }
    }
}

/// Gives connection `db` a weak reference to `checkpoints`, owned by the
/// connection (dropped when it closes); returns the pointer the WAL hook is
/// to be given, or null when SQLite could not take it.
///
/// # Safety
/// `db` must be an open connection handle, not used by another thread during
/// the call.
pub(crate) unsafe fn attach(db: *mut sqlite3, checkpoints: Weak<Checkpoints>) -> *mut c_void {
    let arg = Weak::into_raw(checkpoints).cast_mut().cast::<c_void>();
    // SAFETY: `db` is open and ours for the call (the caller's contract); the
    // key is a static C string; `release` is how `arg` is freed, which SQLite
    // calls when the connection closes, or at once when it cannot store it.
    let rc = unsafe { sqlite3_set_clientdata(db, CLIENT_DATA_KEY.as_ptr(), arg, Some(release)) };
    if rc == SQLITE_OK {
        arg
    } else {
        std::ptr::null_mut()
    }
}

/// Frees a pointer made by [`attach`].
extern "C" fn release(arg: *mut c_void) {
    // SAFETY: SQLite calls this once, with the pointer `attach` made by
    // `Weak::into_raw`.
    drop(unsafe { Weak::from_raw(arg.cast_const().cast::<Checkpoints>()) });
}

/// Asks for a checkpoint of a log of `frames` frames through `arg`, the
/// pointer [`attach`] returned (or null). Returns whether a checkpointer has
/// it; if not, the caller checkpoints itself. Past [`BACKLOG_FRAMES`] it
/// first waits for the checkpointer's copy under way, then answers no.
pub(crate) fn request(arg: *mut c_void, frames: c_int) -> bool {
    if arg.is_null() {
        return false;
    }
    // SAFETY: a non-null `arg` is the connection's pointer from `attach`,
    // which stays valid until the connection closes, after its last commit;
    // `ManuallyDrop` borrows the weak reference without giving it up.
    let weak = std::mem::ManuallyDrop::new(unsafe {
        Weak::from_raw(arg.cast_const().cast::<Checkpoints>())
    });
    let Some(checkpoints) = weak.upgrade() else {
        return false;
    };
    if frames >= BACKLOG_FRAMES {
        checkpoints.backlogs.fetch_add(1, Ordering::Relaxed);
        checkpoints.wait_for_copy();
        if frames >= RESTART_FRAMES {
            // Commits past the backlog mark no longer ask the checkpointer
            // for a copy, and only it restarts a log that other processes
            // keep from restarting: ask it for that.
            checkpoints.restart_wanted.store(true, Ordering::Relaxed);
            let _ = checkpoints.wanted.try_send(());
        }
        return false;
    }
    match checkpoints.wanted.try_send(()) {
        // Full: one is already waiting, and it will see this commit's frames.
        Ok(()) | Err(mpsc::error::TrySendError::Full(())) => true,
        Err(mpsc::error::TrySendError::Closed(())) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A published workstream of `store`, for the saves of a test.
    async fn workstream(store: &crate::sqlite::SqliteStore) -> String {
        use crate::backend::WorkstreamStore;
        let ws = store
            .create_workstream(&crate::types::NewWorkstream::default())
            .await
            .unwrap();
        store.publish_workstream(&ws).await.unwrap();
        ws.ws_id
    }

    /// A pointer as `attach` makes it, without a connection to own it.
    fn pointer(checkpoints: &Arc<Checkpoints>) -> *mut c_void {
        Weak::into_raw(Arc::downgrade(checkpoints))
            .cast_mut()
            .cast()
    }

    #[test]
    fn a_request_reaches_a_live_checkpointer_once_however_often_it_is_made() {
        let (checkpoints, mut requests) = Checkpoints::new();
        let arg = pointer(&checkpoints);
        assert!(request(arg, 1_000));
        assert!(request(arg, 1_000), "merged into the waiting one");
        assert_eq!(requests.0.try_recv(), Ok(()));
        assert!(requests.0.try_recv().is_err(), "one request, not two");
        assert!(
            request(arg, 1_000),
            "a new request after the first was taken"
        );
        assert_eq!(requests.0.try_recv(), Ok(()));
        release(arg);
        assert_eq!(Arc::weak_count(&checkpoints), 0, "the pointer is freed");
    }

    #[test]
    fn without_a_live_checkpointer_the_committer_checkpoints_itself() {
        assert!(!request(std::ptr::null_mut(), 1_000));

        let (checkpoints, _requests) = Checkpoints::new();
        let arg = pointer(&checkpoints);
        drop(checkpoints);
        assert!(!request(arg, 1_000), "the store is gone");
        release(arg);

        let (checkpoints, requests) = Checkpoints::new();
        let arg = pointer(&checkpoints);
        drop(requests);
        assert!(!request(arg, 1_000), "the task has ended");
        release(arg);
    }

    #[test]
    fn past_the_backlog_a_commit_waits_for_the_copy_and_checkpoints_itself() {
        let (checkpoints, mut requests) = Checkpoints::new();
        let arg = pointer(&checkpoints) as usize;
        checkpoints.set_copying(true);
        let (tx, rx) = std::sync::mpsc::channel();
        let committer = std::thread::spawn(move || {
            let handed = request(arg as *mut c_void, BACKLOG_FRAMES);
            tx.send(()).unwrap();
            handed
        });
        assert!(
            rx.recv_timeout(Duration::from_millis(200)).is_err(),
            "the commit waits while the copy runs"
        );
        checkpoints.set_copying(false);
        rx.recv_timeout(BACKLOG_WAIT / 2)
            .expect("the end of the copy lets it go");
        assert!(!committer.join().unwrap(), "it checkpoints itself");
        assert_eq!(checkpoints.backlogs(), 1);
        assert!(requests.0.try_recv().is_err(), "and asks nobody else");
        // Past the restart mark it asks for the restart too (no copy runs
        // now, so it does not wait).
        assert!(!request(arg as *mut c_void, RESTART_FRAMES));
        assert_eq!(checkpoints.backlogs(), 2);
        assert_eq!(requests.0.try_recv(), Ok(()), "a cycle is asked for");
        assert!(checkpoints.restart_wanted.load(Ordering::Relaxed));
        release(arg as *mut c_void);
    }

    /// The whole path on a real store: commits hand the copy over, the
    /// checkpointer runs it, and the log still restarts.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_store_copies_its_log_beside_the_writers_and_the_log_restarts() {
        use crate::backend::TurnStore;
        use crate::types::{NewTurn, Role};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let store = crate::sqlite::SqliteStore::open(&path).await.unwrap();
        let ws = workstream(&store).await;
        let text = "x".repeat(2_000);
        // At least a 4 KiB page per save: 12 MB of log or more unrestarted.
        for i in 0..3_000 {
            store
                .save_turn(&ws, &NewTurn::text(Role::User, format!("{i} {text}")))
                .await
                .unwrap();
        }
        let copies = store._checkpoints.copies();
        assert!(copies >= 5, "{copies} copies beside the writers");
        // A commit past the backlog checkpoints itself, which also restarts
        // the log; that must stay the exception (a slow disk). This does not
        // single out the gated second pass: without it a backlog ended each
        // cycle of about ten copies (tried by hand), under the bound below.
        let backlogs = store._checkpoints.backlogs();
        assert!(
            backlogs * 2 < copies,
            "{backlogs} commits found a backlog, {copies} copies"
        );
        let wal = std::fs::metadata(path.with_extension("db-wal"))
            .unwrap()
            .len();
        assert!(wal < 8 << 20, "the log grew to {wal} bytes");
    }

    /// Stores on one file writing at once, as processes sharing a database
    /// do: the log no longer restarts by itself, so the checkpointer makes it
    /// restart past `RESTART_FRAMES`, and the file shrinks back afterwards.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stores_writing_at_once_keep_their_log_bounded_and_it_shrinks_back() {
        use crate::backend::TurnStore;
        use crate::types::{NewTurn, Role};
        use std::sync::atomic::AtomicBool;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let mut stores = Vec::new();
        for _ in 0..4 {
            stores.push(crate::sqlite::SqliteStore::open(&path).await.unwrap());
        }
        let ws = workstream(&stores[0]).await;
        let wal = path.with_extension("db-wal");
        let wal_len = || std::fs::metadata(&wal).map_or(0, |m| m.len());
        let done = Arc::new(AtomicBool::new(false));
        let sampler = tokio::spawn({
            let (done, wal) = (done.clone(), wal.clone());
            async move {
                let mut peak = 0;
                while !done.load(Ordering::Relaxed) {
                    peak = peak.max(std::fs::metadata(&wal).map_or(0, |m| m.len()));
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                peak
            }
        });
        let text = "x".repeat(2_000);
        futures::future::join_all(stores.iter().enumerate().map(|(n, store)| {
            let (ws, text) = (&ws, &text);
            async move {
                for i in 0..750 {
                    let turn = NewTurn::text(Role::User, format!("{n}.{i} {text}"));
                    store.save_turn(ws, &turn).await.unwrap();
                }
            }
        }))
        .await;
        done.store(true, Ordering::Relaxed);
        let peak = sampler.await.unwrap();
        let restarts: u64 = stores.iter().map(|s| s._checkpoints.restarts()).sum();
        eprintln!("{restarts} restarts, log peak {peak} bytes");
        // Without the restart this run grew the log to about 167 MB.
        assert!(restarts >= 1, "the log was never restarted (peak {peak})");
        assert!(
            peak > crate::sqlite::JOURNAL_SIZE_LIMIT,
            "the log peaked at {peak} bytes: too little to show it being cut back"
        );
        assert!(peak < 64 << 20, "the log grew to {peak} bytes");
        // One store writing alone restarts the log at its next cycle, and
        // the first commit after that cuts the file back.
        let mut saves = 0;
        while wal_len() > crate::sqlite::JOURNAL_SIZE_LIMIT && saves < 2_000 {
            let turn = NewTurn::text(Role::User, format!("alone {saves} {text}"));
            stores[0].save_turn(&ws, &turn).await.unwrap();
            saves += 1;
        }
        let len = wal_len();
        assert!(
            len <= crate::sqlite::JOURNAL_SIZE_LIMIT,
            "the log's file is still {len} bytes after {saves} saves alone (peak {peak})"
        );
    }

    /// A reader that stays in the log (another process's long query) keeps
    /// it from restarting: the restart gives up after its short wait instead
    /// of holding the writers for the usual 30 s, is not retried at every
    /// cycle, and every save still succeeds.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reader_that_stays_in_the_log_costs_one_short_wait_and_loses_no_save() {
        use crate::backend::TurnStore;
        use crate::types::{NewTurn, Role};
        use sqlx::Connection;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let store = crate::sqlite::SqliteStore::open(&path).await.unwrap();
        let ws = workstream(&store).await;
        let text = "x".repeat(2_000);
        let save = |label: String| {
            let (store, ws, text) = (&store, &ws, &text);
            async move {
                let t = std::time::Instant::now();
                let turn = NewTurn::text(Role::User, format!("{label} {text}"));
                store.save_turn(ws, &turn).await.unwrap();
                t.elapsed()
            }
        };
        save("before the reader".into()).await;
        // A read transaction on a connection of its own, as another process
        // would hold it: its snapshot keeps the log in use until it ends.
        let mut reader = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        sqlx::query("BEGIN").execute(&mut reader).await.unwrap();
        let (rows,): (i64,) = sqlx::query_as("SELECT count(*) FROM conversations")
            .fetch_one(&mut reader)
            .await
            .unwrap();
        assert_eq!(rows, 1);
        let mut slowest = Duration::ZERO;
        let mut saves = 0;
        while store._checkpoints.gave_up() == 0 && saves < 20_000 {
            slowest = slowest.max(save(format!("{saves}")).await);
            saves += 1;
        }
        assert_eq!(store._checkpoints.gave_up(), 1, "after {saves} saves");
        // More cycles, all inside the back-off: none tries again.
        for i in 0..500 {
            slowest = slowest.max(save(format!("after {i}")).await);
        }
        eprintln!("{saves} saves to the first give-up; slowest save {slowest:?}");
        assert_eq!(
            store._checkpoints.gave_up(),
            1,
            "retried within the back-off"
        );
        assert_eq!(store._checkpoints.restarts(), 0);
        assert!(
            slowest < crate::sqlite_busy::RESTART_WAIT * 4,
            "a save waited {slowest:?} behind the restart"
        );
        sqlx::query("COMMIT").execute(&mut reader).await.unwrap();
        let (rows,): (i64,) = sqlx::query_as("SELECT count(*) FROM conversations")
            .fetch_one(&mut reader)
            .await
            .unwrap();
        assert_eq!(rows, 1 + saves + 500, "every save is there");
    }
}
