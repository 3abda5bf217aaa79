//! The message queue and the cancel handle shared with front ends.

use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// Messages sent while a turn runs; injected at the next tool-result seam.
#[derive(Clone, Default)]
pub struct MessageQueue {
    inner: Arc<Mutex<std::collections::VecDeque<String>>>,
}

/// Most messages that may wait in a session's queue.
pub const MAX_QUEUED: usize = 10;

/// The queue already holds [`MAX_QUEUED`] messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("queue_full: {MAX_QUEUED} messages are already waiting")]
pub struct QueueFull;

impl MessageQueue {
    /// Queues `text`.
    pub fn push(&self, text: impl Into<String>) -> Result<(), QueueFull> {
        let mut q = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if q.len() >= MAX_QUEUED {
            return Err(QueueFull);
        }
        q.push_back(text.into());
        Ok(())
    }

    /// Removes and returns a queued message by position (`DELETE …/send`).
    pub fn remove(&self, index: usize) -> Option<String> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(index)
    }

    /// Removes the first waiting message equal to `text`; false when none is
    /// waiting (already injected or never queued).
    pub fn remove_text(&self, text: &str) -> bool {
        let mut q = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match q.iter().position(|m| m == text) {
            Some(i) => q.remove(i).is_some(),
            None => false,
        }
    }

    /// Messages waiting.
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes and returns every waiting message, oldest first.
    pub fn drain(&self) -> Vec<String> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
            .collect()
    }
}

/// Cancels whatever the session is doing (stream, approval wait, tools).
#[derive(Clone, Default)]
pub struct CancelHandle {
    current: Arc<Mutex<CancellationToken>>,
}

impl CancelHandle {
    /// Cancels the running turn, if any.
    pub fn cancel(&self) {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .cancel();
    }

    pub(super) fn fresh(&self) -> CancellationToken {
        let token = CancellationToken::new();
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = token.clone();
        token
    }
}
