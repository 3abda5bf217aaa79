//! The message queue and the cancel handle shared with front ends.

use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// Messages sent while a turn runs; injected at the next tool-result seam.
#[derive(Clone, Default)]
pub struct MessageQueue {
    inner: Arc<Mutex<std::collections::VecDeque<Queued>>>,
}

/// One waiting message.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Queued {
    msg_id: String,
    text: String,
}

/// Most messages that may wait in a session's queue.
pub const MAX_QUEUED: usize = 10;

/// The queue already holds [`MAX_QUEUED`] messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("queue_full: {MAX_QUEUED} messages are already waiting")]
pub struct QueueFull;

impl MessageQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::VecDeque<Queued>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `text` under `msg_id`; returns its position (1-based).
    pub fn push(
        &self,
        msg_id: impl Into<String>,
        text: impl Into<String>,
    ) -> Result<usize, QueueFull> {
        let mut q = self.lock();
        if q.len() >= MAX_QUEUED {
            return Err(QueueFull);
        }
        q.push_back(Queued {
            msg_id: msg_id.into(),
            text: text.into(),
        });
        Ok(q.len())
    }

    /// Removes a waiting message by id; `None` when it already joined the
    /// conversation (or never waited).
    pub fn remove(&self, msg_id: &str) -> Option<String> {
        let mut q = self.lock();
        let i = q.iter().position(|m| m.msg_id == msg_id)?;
        q.remove(i).map(|m| m.text)
    }

    /// The oldest waiting message (it becomes the next turn).
    pub fn pop(&self) -> Option<String> {
        self.lock().pop_front().map(|m| m.text)
    }

    /// Messages waiting.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes and returns every waiting message, oldest first.
    pub fn drain(&self) -> Vec<String> {
        self.lock().drain(..).map(|m| m.text).collect()
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
