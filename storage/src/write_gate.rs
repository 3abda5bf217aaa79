//! One writer at a time per process, for SQLite.
//!
//! SQLite has a single write lock per database. When this process's
//! connections race for it (a burst of turns saving at once), every loser
//! parks its connection's worker thread in the busy handler and is woken by
//! each commit to try again: with 100 turns ending together that was most of
//! the store's CPU and the turns' wait (docs/server.md, Storage). Writers of
//! this process instead queue on an async gate, which costs no thread and
//! wakes exactly the next one; the busy handler still arbitrates with other
//! processes on the same file. PostgreSQL locks rows, not the database, and
//! takes no gate.

use crate::error::{Result, StorageError};
use crate::sqlite_busy::BUSY_WAIT;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The gate of one store: `None` where the database needs none.
#[derive(Debug, Clone, Default)]
pub(crate) struct WriteGate(Option<Arc<Semaphore>>);

impl WriteGate {
    /// A gate admitting one writer at a time.
    pub(crate) fn single() -> Self {
        Self(Some(Arc::new(Semaphore::new(1))))
    }

    /// Waits for this process's turn to write, at most as long as SQLite's
    /// own wait for the lock: a writer queued behind one stuck on another
    /// process's lock then fails as that one does, with the transient
    /// "busy" error (HTTP 503), instead of waiting once per writer ahead.
    pub(crate) async fn enter(&self) -> Result<Option<OwnedSemaphorePermit>> {
        let Some(sem) = &self.0 else {
            return Ok(None);
        };
        match tokio::time::timeout(BUSY_WAIT, sem.clone().acquire_owned()).await {
            Ok(Ok(turn)) => Ok(Some(turn)),
            // The semaphore is never closed; say so rather than panic.
            Ok(Err(_)) => Err(StorageError::Config(
                "the store's write gate was closed".into(),
            )),
            Err(_) => Err(StorageError::Database(sqlx::Error::PoolTimedOut)),
        }
    }
}

/// A connection (`C`: a transaction or a pooled connection) that holds this
/// process's turn to write until it is dropped.
pub struct Gated<C> {
    // Dropped first: an abandoned transaction queues its rollback before the
    // next writer is let in.
    inner: C,
    _turn: Option<OwnedSemaphorePermit>,
}

/// A write transaction holding the gate until it commits or is dropped.
pub type WriteTx<DB> = Gated<sqlx::Transaction<'static, DB>>;

/// A pooled connection for single-statement writes, holding the gate.
pub type WriteConn<DB> = Gated<sqlx::pool::PoolConnection<DB>>;

impl<C> Gated<C> {
    pub(crate) fn new(inner: C, turn: Option<OwnedSemaphorePermit>) -> Self {
        Self { inner, _turn: turn }
    }
}

impl<DB: sqlx::Database> WriteTx<DB> {
    /// Commits, then lets the next writer in.
    pub async fn commit(self) -> std::result::Result<(), sqlx::Error> {
        self.inner.commit().await
    }
}

impl<C: Deref> Deref for Gated<C> {
    type Target = C::Target;
    fn deref(&self) -> &C::Target {
        &self.inner
    }
}

impl<C: DerefMut> DerefMut for Gated<C> {
    fn deref_mut(&mut self) -> &mut C::Target {
        &mut self.inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn one_writer_at_a_time_and_the_next_gets_in_when_it_ends() {
        let gate = WriteGate::single();
        let first = gate.enter().await.unwrap();
        assert!(first.is_some());
        let waiting = tokio::spawn({
            let gate = gate.clone();
            async move { gate.enter().await.map(|p| p.is_some()) }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "the second writer waits");
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("let in once the first ended")
            .unwrap();
        assert!(second.unwrap());
        assert!(WriteGate::default().enter().await.unwrap().is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_writer_kept_waiting_as_long_as_sqlite_would_is_told_the_store_is_busy() {
        let gate = WriteGate::single();
        let _held = gate.enter().await.unwrap();
        let started = tokio::time::Instant::now();
        let err = gate.enter().await.unwrap_err();
        assert!(err.is_transient(), "{err:?}");
        assert_eq!(started.elapsed(), BUSY_WAIT);
    }
}
