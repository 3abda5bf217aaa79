//! How a SQLite connection waits for the write lock.
//!
//! SQLite's own busy handler (what `busy_timeout` installs) sleeps 1, 2, 5,
//! 10, 15, 20, 25 … 100 ms between tries. A write holds the lock for tens of
//! microseconds here, so a writer that lost the race slept far longer than it
//! had to wait: in the serve bench's 100 concurrent turns, 113 of 299 usage
//! rows took over 1 ms to insert (mean 3.7 ms), though an insert takes under
//! 0.1 ms. Polling faster instead burns the CPU the lock holder needs.
//!
//! So a waiting connection sleeps until a commit on a connection of this
//! process wakes it (the WAL hook, which SQLite calls after a commit has
//! released the lock), with a timeout for writers it cannot hear (another
//! process, a rollback). It gives up, and the statement fails with
//! `SQLITE_BUSY`, once it has waited [`BUSY_WAIT`].
//!
//! Both callbacks run on the connection's own worker thread (sqlx runs every
//! SQLite call there), never on a tokio worker, so waiting in them blocks
//! nothing else; that thread is the connection's, so its wait state is a
//! thread-local.

use libsqlite3_sys::{
    SQLITE_OK, sqlite3, sqlite3_busy_handler, sqlite3_wal_checkpoint, sqlite3_wal_hook,
};
use std::cell::Cell;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a statement waits for the lock before it fails with `SQLITE_BUSY`.
pub(crate) const BUSY_WAIT: Duration = Duration::from_secs(30);

/// WAL frames after which a commit asks for a checkpoint (SQLite's default;
/// installing a WAL hook replaces the one that did this).
const AUTO_CHECKPOINT_FRAMES: c_int = 1000;

/// Commits seen in this process, and the waiters for the next one.
static COMMITS: Mutex<u64> = Mutex::new(0);
static COMMITTED: Condvar = Condvar::new();

thread_local! {
    /// When this connection's current wait began, and the commit count it
    /// last saw.
    static WAIT: Cell<(Option<Instant>, u64)> = const { Cell::new((None, 0)) };
}

fn commits() -> std::sync::MutexGuard<'static, u64> {
    COMMITS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How long to wait for a commit before trying again anyway.
fn fallback(count: c_int) -> Duration {
    if count < 10 {
        Duration::from_millis(1)
    } else {
        Duration::from_millis(5)
    }
}

/// How long the checkpointer's restart of the log waits for other
/// processes' writers and readers: its store's writers wait behind it.
pub(crate) const RESTART_WAIT: Duration = Duration::from_secs(1);

/// SQLite's busy callback: non-zero means "try again".
extern "C" fn on_busy(_arg: *mut c_void, count: c_int) -> c_int {
    busy(count, BUSY_WAIT)
}

/// The busy callback while the checkpointer restarts the log
/// (`sqlite_checkpoint`): it gives up after [`RESTART_WAIT`].
extern "C" fn on_busy_restarting(_arg: *mut c_void, count: c_int) -> c_int {
    busy(count, RESTART_WAIT)
}

/// Waits for the lock as [`on_busy`] does, giving up after `limit`.
fn busy(count: c_int, limit: Duration) -> c_int {
    let seen = commits();
    if count == 0 {
        // The holder may have committed just now: try once more at once.
        WAIT.set((Some(Instant::now()), *seen));
        return 1;
    }
    let (started, last) = WAIT.get();
    let started = started.unwrap_or_else(Instant::now);
    if started.elapsed() >= limit {
        return 0;
    }
    let now = wait_for_commit(seen, last, fallback(count));
    WAIT.set((Some(started), now));
    1
}

/// Waits until the commit count is past `last` or `timeout` has passed;
/// returns the count.
fn wait_for_commit(seen: std::sync::MutexGuard<'static, u64>, last: u64, timeout: Duration) -> u64 {
    *COMMITTED
        .wait_timeout_while(seen, timeout, |now| *now == last)
        .map_or_else(|e| e.into_inner().0, |(guard, _)| guard)
}

/// SQLite's WAL hook: called after each commit, the lock released. `arg` is
/// the connection's way to its store's checkpointer (`sqlite_checkpoint`), or
/// null.
extern "C" fn on_commit(
    arg: *mut c_void,
    db: *mut sqlite3,
    schema: *const c_char,
    frames: c_int,
) -> c_int {
    // Waiters first: the lock is free, and a checkpoint below may take a
    // while.
    *commits() += 1;
    COMMITTED.notify_all();
    if frames >= AUTO_CHECKPOINT_FRAMES && !crate::sqlite_checkpoint::request(arg, frames) {
        // SAFETY: SQLite passes this connection's handle and the committed
        // schema's name, both valid for the call; a passive checkpoint from
        // the WAL hook is what SQLite's default hook does.
        unsafe { sqlite3_wal_checkpoint(db, schema) };
    }
    SQLITE_OK
}

/// Installs the busy handler (replacing the `busy_timeout` one) and the
/// commit hook on `conn`, the hook handing checkpoints to `checkpoints`.
pub(crate) async fn install(
    conn: &mut sqlx::SqliteConnection,
    checkpoints: std::sync::Weak<crate::sqlite_checkpoint::Checkpoints>,
) -> Result<(), sqlx::Error> {
    let mut handle = conn.lock_handle().await?;
    let db: *mut sqlite3 = handle.as_raw_handle().as_ptr();
    // SAFETY: `db` is this connection's open handle, locked for the calls;
    // the callbacks are plain functions that never unwind; the hook's
    // argument is owned by the connection and outlives its commits.
    let rc = unsafe {
        let arg = crate::sqlite_checkpoint::attach(db, checkpoints);
        sqlite3_wal_hook(db, Some(on_commit), arg);
        sqlite3_busy_handler(db, Some(on_busy), std::ptr::null_mut())
    };
    if rc == SQLITE_OK {
        Ok(())
    } else {
        Err(sqlx::Error::Protocol(format!(
            "sqlite3_busy_handler failed with code {rc}"
        )))
    }
}

/// Makes `conn` give up waiting for the lock after [`RESTART_WAIT`]
/// (`restarting`) or, again, [`BUSY_WAIT`].
pub(crate) async fn set_restarting(
    conn: &mut sqlx::SqliteConnection,
    restarting: bool,
) -> Result<(), sqlx::Error> {
    let mut handle = conn.lock_handle().await?;
    let db: *mut sqlite3 = handle.as_raw_handle().as_ptr();
    let handler = if restarting {
        on_busy_restarting
    } else {
        on_busy
    };
    // SAFETY: `db` is this connection's open handle, locked for the call;
    // setting a busy handler only stores it.
    let rc = unsafe { sqlite3_busy_handler(db, Some(handler), std::ptr::null_mut()) };
    if rc == SQLITE_OK {
        Ok(())
    } else {
        Err(sqlx::Error::Protocol(format!(
            "sqlite3_busy_handler failed with code {rc}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_wakes_a_waiting_connection() {
        let seen = commits();
        let last = *seen;
        let committer = std::thread::spawn(|| {
            on_commit(
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null(),
                0,
            )
        });
        // Only the commit's notification can end this wait early.
        let t = Instant::now();
        let now = wait_for_commit(seen, last, Duration::from_secs(60));
        assert!(now > last);
        assert!(t.elapsed() < Duration::from_secs(30), "woken by the commit");
        assert_eq!(committer.join().unwrap(), SQLITE_OK);
    }

    #[test]
    fn retries_at_once_then_gives_up_once_the_busy_wait_is_spent() {
        std::thread::spawn(|| {
            assert_eq!(on_busy(std::ptr::null_mut(), 0), 1);
            let (started, seen) = WAIT.get();
            assert!(started.is_some());
            let long_ago = Instant::now().checked_sub(BUSY_WAIT + Duration::from_secs(1));
            WAIT.set((long_ago, seen));
            assert_eq!(on_busy(std::ptr::null_mut(), 1), 0);
        })
        .join()
        .unwrap();
    }
}
